"""The organiser's side of a bot's life, around the server: tools that run, check and stress bots.

Modules: :mod:`house` (the house bots as gRPC clients of the SDK), :mod:`stdio` (the
JSON-lines bridge that makes any program a bot), :mod:`checkbot` (``gaigel check-bot``:
a scripted server that drives a bot through every decision kind), :mod:`chaos`
(``gaigel chaos-bot``: a bot that injects faults, for soak tests), :mod:`trial`
(``gaigel try`` and ``gaigel rematch``) and :mod:`commands` (their CLI registration).

It may import the engine, the protocol, the SDK and the server; the SDK imports none of it.
"""
