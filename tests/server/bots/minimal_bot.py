"""A minimal bot process for `gaigel try` tests: answers the first legal id (or misbehaves on request).

Reads GAIGEL_SERVER, GAIGEL_TOKEN and GAIGEL_BOT_NAME; ``--illegal`` answers one illegal id first;
``--exit-mid-match`` exits with code 3 at its first decision (a crash the server sees as a disconnect).
"""

from __future__ import annotations

import os
import queue
import sys
from collections.abc import Iterator

import grpc

from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import bot_service_pb2_grpc as bs_grpc


def main() -> int:
    illegal = "--illegal" in sys.argv
    out: queue.Queue[bs.PlayRequest | None] = queue.Queue()
    out.put(
        bs.PlayRequest(
            join=bs.Join(
                bot_token=os.environ["GAIGEL_TOKEN"],
                bot_name=os.environ.get("GAIGEL_BOT_NAME", "candidate"),
                bot_version="minimal-1",
                protocol_version=1,
            )
        )
    )

    def requests() -> Iterator[bs.PlayRequest]:
        while (item := out.get()) is not None:
            yield item

    with grpc.insecure_channel(os.environ["GAIGEL_SERVER"]) as channel:
        for msg in bs_grpc.BotServiceStub(channel).Play(requests()):
            kind = msg.WhichOneof("message")
            if kind == "decision_request":
                if "--exit-mid-match" in sys.argv:
                    os._exit(3)
                req = msg.decision_request
                if illegal:
                    illegal = False
                    out.put(
                        bs.PlayRequest(
                            action=bs.Action(
                                decision_id=req.decision_id, action_id=164 if req.legal_actions[0].id != 164 else 0
                            )
                        )
                    )
                out.put(
                    bs.PlayRequest(action=bs.Action(decision_id=req.decision_id, action_id=req.legal_actions[0].id))
                )
            elif kind == "match_end":
                out.put(bs.PlayRequest(leave=bs.Leave()))
    out.put(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
