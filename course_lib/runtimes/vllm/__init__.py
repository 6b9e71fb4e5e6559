"""vLLM, one package: what its launch resolves to and what its start-up allocates, release by release.

=================  ============================================================================================
module             holds
=================  ============================================================================================
``launch``         one launch resolved (platform, release, block size): :class:`ResolvedLaunch`
``releases``       vLLM's releases and what changed in each
``platforms``      CUDA, ROCm, CPU as far as they change the KV cache
``estimate``       the start-up budget (``estimate_vllm``)
``kv_groups``      the KV cache groups and page sizes (``kv``, ``kv_dsv4``, ``given_kv``, ``mamba_pages``)
``multimodal``     the encoder cache of vision-language models
``spec``           speculative decoding's drafter
``scheduler``      the V1 scheduler's settings for ``simulate --runtime vllm``
``log``            the vLLM part of the start-up log reader
``oracle``         vLLM itself (its CPU build, in a venv of its own) as the oracle (``oracle_mm``,
                   ``oracle_recorded``, ``_oracle_shim``)
=================  ============================================================================================
"""
