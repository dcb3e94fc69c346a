"""A deliberately limited bot for check-bot tests, written against the raw stubs.

--mode never-answers: joins and never answers a decision.
--mode no-resume:     plays (and retries after a rejection) but exits with code 3 when the stream drops.
--mode no-retry:      plays, but sends nothing more after an ActionRejected.
--mode leave-and-stay: plays, sends Leave when a match starts, and stays running after its session ends.
"""

import argparse
import os
import queue
import sys
import time

import grpc

from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import bot_service_pb2_grpc as pb_grpc


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("never-answers", "no-resume", "no-retry", "leave-and-stay"), required=True)
    mode = parser.parse_args().mode
    outbox: queue.SimpleQueue = queue.SimpleQueue()
    outbox.put(
        pb.PlayRequest(
            join=pb.Join(
                bot_token=os.environ["GAIGEL_TOKEN"], bot_name=os.environ["GAIGEL_BOT_NAME"], protocol_version=1
            )
        )
    )

    def requests():
        while (item := outbox.get()) is not None:
            yield item

    channel = grpc.insecure_channel(os.environ["GAIGEL_SERVER"])
    stub = pb_grpc.BotServiceStub(channel)
    last = None
    try:
        for msg in stub.Play(requests()):
            if msg.HasField("match_start") and mode == "leave-and-stay":
                outbox.put(pb.PlayRequest(leave=pb.Leave()))
            if msg.HasField("decision_request") and mode in ("no-resume", "no-retry", "leave-and-stay"):
                last = msg.decision_request
                outbox.put(
                    pb.PlayRequest(action=pb.Action(decision_id=last.decision_id, action_id=last.legal_actions[-1].id))
                )
            elif (
                msg.HasField("action_rejected") and msg.action_rejected.decision_open and last is not None
            ) and mode == "no-resume":
                outbox.put(
                    pb.PlayRequest(action=pb.Action(decision_id=last.decision_id, action_id=last.legal_actions[0].id))
                )
    except grpc.RpcError as e:
        print(f"raw_bot: stream ended with {e.code().name}; giving up", file=sys.stderr)
        return 3
    finally:
        outbox.put(None)
    if mode == "leave-and-stay":
        time.sleep(3600)  # until check-bot stops it
    return 0


if __name__ == "__main__":
    sys.exit(main())
