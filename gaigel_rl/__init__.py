"""Gaigel for learning agents: one observation tensor and adapters for PettingZoo, Gymnasium and OpenSpiel.

An optional package (``pip install -e '.[rl]'``) over the engine; the engine never imports it.
:mod:`gaigel_rl.tensor` needs numpy only; :mod:`gaigel_rl.pettingzoo_env`,
:mod:`gaigel_rl.gymnasium_env` and :mod:`gaigel_rl.openspiel_game` need their libraries.
See docs/rl.md.
"""
