"""The HTTP API: ``agentwrap serve`` (issue 10).

A thin adapter over :class:`~agentwrap.service.Service`, like the CLI: every
rule a message must pass (validation, limits, idempotency, trust, audit,
wake-ups) is the service's; this package adds only what HTTP needs. One job
per module:

- :mod:`.models`: the typed request and response bodies (they generate the
  OpenAPI document);
- :mod:`.routes`: the endpoints, each a call or two into the service;
  :mod:`.enqueue`: storing a message sent to a session's input, for the
  route and for its hot path, :mod:`.fast_input` (answered without FastAPI's
  routing); :mod:`.addresses`: a session's address in a path, ``NAME`` or
  ``HOST/NAME``;
- :mod:`.control`: a session's screen, starting and stopping sessions (the
  dashboard's; its models with it);
- :mod:`.errors`: the one mapping of agentwrap's error tree to status codes
  and JSON bodies ``{error, ...}``;
- :mod:`.auth`: the bearer token (its file, and the check on every ``/api`` request);
- :mod:`.middleware`: request bodies capped before parsing, an access log
  without content or tokens;
- :mod:`.sse`: the event stream (the store's event kinds mapped to the API's
  names, resumable with ``Last-Event-ID``); :mod:`.ws`: the same events over a
  WebSocket; :mod:`.terminal_ws`: a session's live terminal for the dashboard,
  and taking over its keyboard;
- :mod:`.dashboard`: the web page, static files talking to ``/api``;
  :mod:`.tap`: the page a one-tap answer link opens (a GET shows, a POST answers);
- :mod:`.openapi`: the OpenAPI document, generated from the models and routes;
- :mod:`.pool`: services for the server's worker threads;
- :mod:`.app`: the application put together; :mod:`.server`: sockets and uvicorn.
"""
