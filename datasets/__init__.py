"""Graphs and devices: the representation, validation, generators, importers and datasets."""
from datasets.errors import RegalError
from datasets.graph import Graph, GraphBuilder

__all__ = ["Graph", "GraphBuilder", "RegalError"]
