"""Placement and scheduling of computation graphs: decoding, performance models, policies,
training, baselines, execution and the command-line tools. See WORKSPACE.md."""
from regal import startup

startup.use_persistent_caches()
