"""Actor messages. A message is a tuple ``(kind, src, dst, payload)`` - tuples because every act
sends several and they must be cheap.

* ``REGST``: a producer hands a filled register to a consumer (payload: the Regst);
* ``ACK``: a consumer is done reading a register (payload: the Regst) - it goes back to its
  producer and becomes writable again;
* ``EORD``: end of registers - the producer will send nothing more (payload: regst desc id);
* ``START``: the runtime starts a source actor;
* ``CONSTRUCT_ACTOR`` / ``STOP_THREAD``: commands handled by the thread itself.
"""
REGST = 0
ACK = 1
EORD = 2
START = 3
CONSTRUCT_ACTOR = 4
STOP_THREAD = 5

KIND_NAMES = {REGST: "regst", ACK: "ack", EORD: "eord", START: "start",
              CONSTRUCT_ACTOR: "construct_actor", STOP_THREAD: "stop_thread"}
