"""The single-machine strategies (above ``api``), each v1 class beside its
v2 twin.

* ``one_device``: ``OneDeviceStrategy`` (v2) and ``OneDeviceStrategyV1``;
* ``central_storage``: ``CentralStorageStrategy`` and its v1 class;
* ``multi_step``: the deprecated ``experimental_run_steps_on_iterator``;
* ``auto``: ``auto_strategy()``, a strategy chosen for the machine.
"""
