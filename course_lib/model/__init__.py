"""The model: what a checkpoint holds and how many bytes it needs per token.

``models`` (the :class:`ModelSpec` and its byte formulas), ``spec`` (the spec's fields), ``families/`` (one
config reader per architecture family), ``architectures`` (architecture class -> family), ``meta_model``
(transformers on the meta device, for decoders no family covers), ``model_configs`` and ``presets`` (the
lesson's models and GPUs), ``checkpoint`` and ``hub`` (a local folder or a Hub id), ``quantization`` and
``modelopt`` (weight bytes of quantized checkpoints). Imports only the shared modules on top of course_lib.
"""
