"""This process among the processes running one program: its place (``world.py``: rank, world
size, local rank, nodes, a simulated rank), the MPI groups of placements (``groups.py``) and
the watchdog that bounds every wait between ranks (``watchdog.py``).

The lowest layer with behaviour: the op kernels that call MPI, the VM's communication worker,
the runtime's transfer actors and the user APIs above (``flow.env``, ``flow.comm``,
``flow.distributed``) all ask it. A one-process program never imports mpi4py.
"""
