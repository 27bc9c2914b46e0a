"""The parallelism space of a training step and what each configuration costs (issue 83):
collectives at NCCL's costs on real fabrics (`collectives`)."""
