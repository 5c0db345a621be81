"""Tasks: the format (`schema`), the task-set index, proposers and validation."""

from touchstone.tasks.schema import EntryPoint, Task, TaskError, TaskSource, load_task, load_task_set

__all__ = ["EntryPoint", "Task", "TaskError", "TaskSource", "load_task", "load_task_set"]
