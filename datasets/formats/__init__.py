"""Importers and exporters for other tools' graph formats."""
