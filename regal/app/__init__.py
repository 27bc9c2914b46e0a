"""The application behind `python -m regal.optimize`: running a method on a graph and writing
its result (`optimize_lib`), Gantt charts (`gantt`)."""
