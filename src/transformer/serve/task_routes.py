"""The endpoints a task answers itself: every Route of the table of tasks (transformer.tasks) that
holds an `answer`, mounted as POST at its path when the app is made. The request's JSON object and
the pipeline go to the answer on the worker thread, as the built-in endpoints' jobs do; the answer's
return value is the JSON reply.

The rules: a model of another task gets 400 wrong_endpoint (State.serving, as everywhere); a body
that is not a JSON object, 422; a ValueError from the answer (PipelineError, DataError, ...) is the
client's mistake, 422 with its message; the queue, the timeout and a client that goes away are
State.submit's.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from ..tasks import TASKS
from ..tasks.base import Route
from .errors import ApiError
from .worker import Job


def task_router() -> APIRouter:
    """A router with a POST endpoint for each route of TASKS that holds an answer."""
    router = APIRouter()
    for task in TASKS.values():
        for route in task.routes:
            if route.answer is not None:
                router.add_api_route(
                    route.path, answering(route), methods=["POST"], summary=task.summary
                )
    return router


def answering(route: Route):
    """The endpoint that answers `route`: its body to route.answer on the worker thread."""

    async def endpoint(request: Request):
        state = request.app.state.serve
        pipeline = state.serving(route.path)
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ApiError(422, "invalid_request", "the body must be a JSON object")

        def run():
            try:
                return route.answer(pipeline, body)
            except ValueError as e:
                raise ApiError(422, "invalid_request", str(e)) from None

        return await state.submit(Job(route.path, run=run), request)

    endpoint.__name__ = "answer_" + route.path.strip("/").replace("/", "_").replace("-", "_")
    return endpoint


def task_paths() -> frozenset[str]:
    """The paths task_router serves (/metrics counts each by name)."""
    return frozenset(r.path for task in TASKS.values() for r in task.routes if r.answer)
