"""Chat channels both ways (issue 40): ``agentwrap chat telegram``.

A person away from the terminal hears that an agent waits, reads the exact
command and answers with a button, or queues a message to a session, from a
chat. Telegram first: its Bot API works outbound only (long polling), so
nothing listens on this machine. One job per module:

- :mod:`.telegram_api`: the four Bot API methods the bridge calls, over
  httpx, the token kept out of every log and error;
- :mod:`.ledger`: the bridge's durable record (updates acted on, notices
  sent), so a redelivered update or a restart never answers twice;
- :mod:`.bridge`: the two loops (questions out, updates in), every answer
  and message through :class:`~agentwrap.service.Service` as source ``chat``.

A surface like the others: it may import the layers below, nothing imports
it but the CLI.
"""
