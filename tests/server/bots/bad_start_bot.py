"""A bot process that fails to start in one chosen way, for the start-up diagnosis of `gaigel try` and
`gaigel check-bot`. Prints "cause" to stderr (then flushes) at the moment the cause happens.

--mode sleep:        never connects, just runs.
--mode exit:         writes two lines to stderr and exits with code 4.
--mode wrong-token:  joins with a token that is not $GAIGEL_TOKEN, then keeps running (holding its stream).
--mode malformed:    sends a PlayRequest with no message set, then keeps running.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import threading
import time
from collections.abc import Iterator

import grpc

from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import bot_service_pb2_grpc as bs_grpc


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("sleep", "exit", "wrong-token", "malformed"), required=True)
    mode = parser.parse_args().mode
    if mode == "sleep":
        print("cause", file=sys.stderr, flush=True)
        time.sleep(3600)
        return 0
    if mode == "exit":
        print("bad_start_bot: loading the model", file=sys.stderr)
        print("bad_start_bot: no model file model.bin", file=sys.stderr)
        print("cause", file=sys.stderr, flush=True)
        return 4
    out: queue.Queue[bs.PlayRequest | None] = queue.Queue()
    if mode == "wrong-token":
        join = bs.Join(bot_token="not-the-token", bot_name=os.environ["GAIGEL_BOT_NAME"], protocol_version=1)
        out.put(bs.PlayRequest(join=join))
    else:
        out.put(bs.PlayRequest())

    def requests() -> Iterator[bs.PlayRequest]:
        while (item := out.get()) is not None:
            yield item

    channel = grpc.insecure_channel(os.environ["GAIGEL_SERVER"])
    call = bs_grpc.BotServiceStub(channel).Play(requests())
    print("cause", file=sys.stderr, flush=True)
    try:
        for _ in call:
            pass
    except grpc.RpcError:
        pass
    threading.Event().wait()  # a bot that does not give up: the harness must still report the refusal
    return 0


if __name__ == "__main__":
    sys.exit(main())
