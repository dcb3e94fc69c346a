#!/usr/bin/env bash
# A complete Gaigel bot in Bash + jq for `gaigel stdio-bot` (docs/stdio-protocol.md):
# one JSON line in per server message; answer each "decision" line with one line {"action": ID}.
#   gaigel try --players 4 -- gaigel stdio-bot -- bash clients/stdio/random_bot.sh
RANDOM=0
while IFS= read -r line; do
  case $line in
    '{"type":"match_start"'*)  # reseed from the seat's bot seed: a rematch plays the same
      seed=$(jq -r '.bot_seed' <<<"$line")
      RANDOM=${seed:0:9} ;;
    '{"type":"decision"'*)   # "type" is always the first key: no jq for the other lines
      # ---- YOUR LOGIC HERE: pick one id of .legal_actions (see .observation) ----
      mapfile -t ids < <(jq -r '.legal_actions[].id' <<<"$line")
      echo "{\"action\": ${ids[RANDOM % ${#ids[@]}]}}" ;;
    '{"type":"match_end"'*)
      echo "random_bot.sh: match over" >&2 ;;
  esac
done
