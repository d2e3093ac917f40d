"""``treadle serve``: the HTTP API (and the web page) over the commands layer.

Needs the ``server`` extra (Starlette, sse-starlette, uvicorn); nothing
outside this package and the ``serve`` command imports it, so ``import
treadle`` never loads a web framework. :func:`~treadle._server._app.create_app`
makes the application from a :class:`~treadle._server._settings.ServerSettings`.
"""
