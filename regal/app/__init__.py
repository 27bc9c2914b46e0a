"""The command-line application behind `python -m regal.optimize`: running a method on a graph
and writing its result (`optimize_lib`), Gantt charts (`gantt`), and spreading work over the
host's cores (`parallel`)."""
