"""Tasks: the format (`schema`), a task's environment and isolation probe, the
seed projects, and the mutation site walker (read by the teacher and by task
making, `touchstone.taskmaking`)."""

from touchstone.tasks.schema import EntryPoint, Task, TaskError, TaskSource, load_task, load_task_set

__all__ = ["EntryPoint", "Task", "TaskError", "TaskSource", "load_task", "load_task_set"]
