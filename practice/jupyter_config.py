"""practice/jupyter_config.py - Jupyter's settings for the course: a learner's notebooks live in workspace/.

    .venv/bin/jupyter lab --config=practice/jupyter_config.py --notebook-dir=. chapters/ch01_cp_async.ipynb

The chapters' notebooks are the course's (git tracks them). Opened through this file, a chapter opens as the
course wrote it until you save it; from the first save on (yours, or Jupyter's autosave, which also rewrites
kernel metadata) it is your copy, workspace/chapters/<name>.ipynb (workspace/ is ignored by git), and that copy
is what opens next time, under the same name. The tracked notebook never changes, so `git pull` of a course
update never meets your edits. To see a chapter's newest version after an update, delete your copy
(workspace/chapters/<name>.ipynb) or open it beside the course's (`git show HEAD:chapters/<name>.ipynb`).
The kernel still runs in chapters/, so a chapter's relative paths are the same either way.

Tested in headless Chromium: tests/chapters/test_notebooks_stay_the_courses.py
"""
import os

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

SHADOWED = "chapters"          # notebooks under this folder (the course's) are saved as the learner's copies
COPIES = "workspace"           # ... under this folder, relative to the notebook directory (ignored by git)


class CourseNotebooks(AsyncLargeFileManager):
    """Saves of a chapter's notebook go to workspace/<its path>; opening it reads that copy once it exists."""

    def _copy(self, path: str) -> str | None:
        p = path.strip("/")
        return f"{COPIES}/{p}" if p.startswith(SHADOWED + "/") and p.endswith(".ipynb") else None

    async def _where(self, path: str) -> str:
        copy = self._copy(path)
        return copy if copy and await self.file_exists(copy) else path

    @staticmethod
    def _as(model: dict, path: str) -> dict:
        model["path"], model["name"] = path.strip("/"), path.strip("/").rsplit("/", 1)[-1]
        return model

    async def get(self, path, content=True, type=None, format=None, **kw):
        where = await self._where(path)
        return self._as(await super().get(where, content=content, type=type, format=format, **kw), path) \
            if where != path else await super().get(path, content=content, type=type, format=format, **kw)

    async def save(self, model, path=""):
        copy = self._copy(path)
        if copy is None:
            return await super().save(model, path)
        os.makedirs(os.path.join(self.root_dir, os.path.dirname(copy)), exist_ok=True)
        return self._as(await super().save(model, copy), path)

    async def create_checkpoint(self, path):
        return await super().create_checkpoint(await self._where(path))

    async def list_checkpoints(self, path):
        return await super().list_checkpoints(await self._where(path))

    async def restore_checkpoint(self, checkpoint_id, path):
        return await super().restore_checkpoint(checkpoint_id, await self._where(path))

    async def delete_checkpoint(self, checkpoint_id, path):
        return await super().delete_checkpoint(checkpoint_id, await self._where(path))

    async def delete_file(self, path):
        """Deleting a chapter deletes your copy of it (the course's stays)."""
        copy = self._copy(path)
        if copy is None:
            return await super().delete_file(path)
        if await self.file_exists(copy):
            return await super().delete_file(copy)


c = get_config()  # noqa: F821 - Jupyter runs this file with get_config defined
c.ServerApp.contents_manager_class = CourseNotebooks
