"""A stdio bot in Python: answers {"action": first legal id}. --mode garbage|exit|slow for fault tests."""

import json
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "first"
seen = set()
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] != "decision":
        continue
    if mode == "garbage":
        print("this is not an answer", flush=True)
    elif mode == "exit":
        sys.exit(7)
    elif mode == "bare":
        print(msg["legal_actions"][-1]["id"], flush=True)
    else:
        print(json.dumps({"action": msg["legal_actions"][0]["id"], "decision_id": msg["decision_id"]}), flush=True)
