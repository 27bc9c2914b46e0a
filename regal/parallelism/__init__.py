"""The parallelism space of a training step and what each configuration costs (issue 83):
a step's profile (`profile`), a mesh's time and memory (`plan`), collectives at NCCL's costs
(`collectives`), the engineers' configurations and the search (`configurations`)."""
