"""Serving one model on one device: the budget, admission, loading, offload and the request trace.

``budget`` (the pools of device memory), ``admission`` (which requests fit the KV pool), ``loading`` (the
readiness timeline), ``offload`` (weights kept in host memory), ``trace`` (requests in time) and ``scenario``
(the lesson's device, model and trace). Imports ``course_lib.model`` and the shared modules, nothing above.
"""
