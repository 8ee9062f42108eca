"""NSQ's command-line tools, written on this client, with NSQ's flag names:

- ``nsq_tail`` (:mod:`.tail`): print the messages of topics to stdout;
- ``nsq_stat`` (:mod:`.stat`): a channel's depth, in-flight and rates across a cluster,
  as NSQ's nsq_stat prints them;
- ``to_nsq`` (:mod:`.to_nsq`): publish the lines (or other delimited records) of stdin.

Each module's ``main(argv=None) -> int`` is the console script; ``python -m
nsq_client.tools.<module>`` runs it too.
"""
