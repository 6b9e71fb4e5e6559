"""The admission simulator: hand-worked runs, a literal reference simulator, and invariants.

The fast simulator counts block claims by phase (t mod block_size) instead of
looping over running requests. ``reference_simulate`` below follows the
documented step rules literally, one request at a time, and the two must agree
on every record and every step.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from course_lib.serving.admission import PAGED, RESERVE_MAX, AdmissionConfig, kv_config
from course_lib.errors import CourseInputError
from course_lib.simulate import FINISHED, REJECTED, percentile_nearest_rank, simulate
from course_lib.serving.trace import Request, parse_trace, read_trace, synthetic_trace, write_trace

GB = 10**9
LLAMA2_7B_KV_PER_TOKEN = 2 * 32 * 32 * 128 * 2   # 524,288 B per token, fp16


def lesson_config(policy: str = RESERVE_MAX, **rules) -> AdmissionConfig:
    """24 GB - 14 GB weights - 2 GB workspace - 2 GB reserve = 6 GB = 715 blocks of 8 MiB."""
    return kv_config(device_bytes=24 * GB, weights_bytes=14 * GB, workspace_bytes=2 * GB, reserve_bytes=2 * GB,
                     kv_bytes_per_token=LLAMA2_7B_KV_PER_TOKEN, policy=policy, **rules)


def eleven(prompt: int = 608, max_new: int = 512, output: int = 512) -> list[Request]:
    return [Request(f"r{i}", 0, prompt, max_new, output) for i in range(11)]


# ------------------------------------------------------------------ the lesson's ten/eleven case

def test_ten_fit_and_the_eleventh_waits_for_a_finish():
    # By hand: each request is 608 + 512 = 1,120 tokens = 70 blocks (587,202,560 B = 0.587 GB).
    # The budget is 715 blocks: 10 x 70 = 700 fit at step 0; the 11th needs 70 with 15 free -> queued.
    # The ten are prefilled at step 0 and generate one token per step at steps 1..512: they finish
    # at step 512 and free their blocks at its end. The 11th starts at 513 and finishes at 513 + 512 = 1025.
    res = simulate(eleven(), lesson_config())
    first_ten, last = res.requests[:10], res.requests[10]
    assert [(r.status, r.admitted_step, r.finished_step) for r in first_ten] == [(FINISHED, 0, 512)] * 10
    assert (last.status, last.admitted_step, last.finished_step, last.queued_steps) == (FINISHED, 513, 1025, 513), \
        "the eleventh must be queued (not rejected, not crashed) and start when the first ten free their blocks"
    assert last.reason.startswith("queued at step 0"), last.reason
    steps = res.steps
    assert (steps["active"][0], steps["queued"][0]) == (10, 1)
    assert steps["kv_bytes"][0] == 700 * 8_388_608 == 5_872_025_600 <= 6 * GB
    assert steps["kv_bytes"][512] == 5_872_025_600 and steps["kv_bytes"][513] == 70 * 8_388_608
    assert (steps["active"][513], steps["queued"][513]) == (1, 0)
    assert len(steps["kv_bytes"]) == res.summary.steps == 1026
    assert res.summary.max_active == 10 and res.summary.completed == 11 and res.summary.rejected == 0
    # tokens held at step 0: 10 prompts of 608; at step 512: 10 x 1,120
    assert steps["token_bytes"][0] == 10 * 608 * LLAMA2_7B_KV_PER_TOKEN
    assert steps["token_bytes"][512] == 10 * 1120 * LLAMA2_7B_KV_PER_TOKEN


def test_paged_admits_all_eleven_then_preempts_the_youngest():
    # Paged claims only the prompt: 608 tokens = 38 blocks; 11 x 38 = 418 <= 715 - 7 (watermark): all start.
    # At step t each holds 608 + t tokens. At t = 432 that is 1,040 = 65 full blocks each: 11 x 65 = 715,
    # every block. At t = 433 all eleven need a 66th block and none is free: the youngest (r10) is preempted
    # (65 blocks back), the other ten take 10. r10 keeps its 432 generated tokens and waits at the head.
    # The ten finish at 512; at 513 r10 is re-prefilled (608 + 432 = 1,040 tokens, 65 blocks) and generates
    # its last 512 - 432 = 80 tokens: it finishes at 513 + 80 = 593.
    res = simulate(eleven(), lesson_config(PAGED))
    r10 = res.requests[10]
    assert (r10.admitted_step, r10.finished_step, r10.preemptions, r10.queued_steps) == (0, 593, 1, 0)
    assert res.summary.preemptions == 1 and res.summary.recompute_tokens == 1040
    assert res.steps["blocks_used"][432] == 715 and res.steps["blocks_used"][433] == 10 * 66
    assert (res.steps["active"][433], res.steps["queued"][433]) == (10, 1)
    assert max(res.steps["kv_bytes"]) <= 6 * GB


def test_service_policy_rejects_instead_of_queueing():
    res = simulate(eleven(), lesson_config(max_queue_len=0))
    last = res.requests[10]
    assert (last.status, last.queued_steps) == (REJECTED, 0) and "max_queue_len=0" in last.reason
    res = simulate(eleven(), lesson_config(max_wait_steps=100))
    last = res.requests[10]
    assert (last.status, last.queued_steps) == (REJECTED, 100) and "max_wait_steps=100" in last.reason
    assert res.summary.rejected_wait == 1


def test_never_fitting_request_is_rejected_immediately_and_blocks_nobody():
    # the budget holds 715 x 16 = 11,440 tokens; 11,000 + 441 = 11,441 can never fit
    trace = [Request("huge", 0, 11_000, 441, 1), Request("small", 0, 16, 16, 16)]
    res = simulate(trace, lesson_config())
    huge, small = res.requests
    assert (huge.status, huge.queued_steps, huge.admitted_step) == (REJECTED, 0, None)
    assert huge.reason.startswith("never fits") and "716 blocks" in huge.reason, huge.reason
    assert (small.status, small.admitted_step, small.finished_step) == (FINISHED, 0, 16)


def test_reserve_max_head_of_line_blocking():
    # 10 blocks of 1 token (block_size 1, 1 B per token). "big0" holds 6 from step 0 to 5.
    # "big1" needs 5 (only 4 free) and waits at the head; "tiny" needs 2 and would fit, but FCFS keeps it
    # behind big1. big0 finishes at step 5 -> at 6 big1 (5) and tiny (2) both start.
    cfg = AdmissionConfig(kv_budget_bytes=10, kv_bytes_per_token=1, block_size_tokens=1)
    trace = [Request("big0", 0, 1, 5, 5), Request("big1", 0, 1, 4, 4), Request("tiny", 0, 1, 1, 1)]
    res = simulate(trace, cfg)
    assert [r.admitted_step for r in res.requests] == [0, 6, 6]
    assert "1 request(s) waited ahead" in res.requests[2].reason


def test_one_request_utilization_worked_by_hand():
    # prompt 16, max_new 64, output 16, blocks of 16, 1 B per token. Steps k = 0..16 hold 16 + k tokens:
    # sum = 17 x 16 + (0 + 1 + ... + 16) = 272 + 136 = 408 token-steps.
    # reserve-max reserves 80 slots (5 blocks) for 17 steps = 1,360 slot-steps: utilization 408/1360 = 0.3.
    # Blocks holding a token: 1 at k = 0, 2 after: 33 block-steps = 528 slots, so the empty tail of those
    # blocks is 528 - 408 = 120 (fragmentation 120/1360) and 85 - 33 = 52 blocks never held a token.
    # paged claims only those 33 block-steps: utilization 408/528, fragmentation 120/528.
    trace = [Request("only", 0, 16, 64, 16)]
    rm = simulate(trace, AdmissionConfig(kv_budget_bytes=160, kv_bytes_per_token=1)).summary
    assert rm.kv_utilization == pytest.approx(408 / 1360)
    assert rm.internal_fragmentation == pytest.approx(120 / 1360)
    assert rm.reserved_unused == pytest.approx(52 / 85)
    pg = simulate(trace, AdmissionConfig(kv_budget_bytes=160, kv_bytes_per_token=1, policy=PAGED)).summary
    assert pg.kv_utilization == pytest.approx(408 / 528)
    assert pg.internal_fragmentation == pytest.approx(120 / 528) and pg.reserved_unused == 0


def test_paged_holds_more_sequences_when_outputs_are_short():
    # Chat-like load on the lesson budget: prompts 64..512, max_new_tokens 1,024, real outputs ~128.
    trace = synthetic_trace(400, seed=3, arrival_rate=0.1, prompt_tokens=(64, 512), max_new_tokens=1024,
                            mean_output_tokens=128)
    rm = simulate(trace, lesson_config(RESERVE_MAX)).summary
    pg = simulate(trace, lesson_config(PAGED)).summary
    assert pg.max_active > rm.max_active and pg.mean_active > rm.mean_active
    # PagedAttention (Kwon et al. 2023): earlier systems that reserve for the maximum used only
    # 20.4%-38.2% of KV memory for token states; paged blocks waste under 4%, only in last blocks.
    assert rm.kv_utilization < 0.382, f"reserve-max should leave most reserved KV empty: {rm.kv_utilization:.3f}"
    assert rm.reserved_unused > 0.5
    assert pg.kv_utilization > 0.96 and pg.internal_fragmentation < 0.04
    assert pg.p99_queue_steps <= rm.p99_queue_steps


def test_json_shape():
    res = simulate(eleven()[:2], lesson_config())
    data = json.loads(json.dumps(res.to_dict()))
    assert {"requests", "steps", "summary"} <= set(data)
    assert {"kv_bytes", "blocks_used", "active", "queued"} <= set(data["steps"])
    assert set(data["requests"][0]) >= {"id", "status", "reason", "arrival_step", "admitted_step",
                                        "finished_step", "queued_steps", "preemptions"}
    for key in ("peak_kv_bytes", "kv_budget_bytes", "max_active", "completed", "rejected", "preemptions",
                "kv_utilization", "internal_fragmentation", "p50_queue_steps", "p99_queue_steps"):
        assert key in data["summary"], key


def test_to_dict_keeps_the_dataclass_fields_in_order():
    # to_dict is written out field by field (dataclasses.asdict deep-copies, ten times slower on 100k records):
    # it must still give exactly the fields, in order
    from dataclasses import asdict

    res = simulate(eleven(), lesson_config(max_wait_steps=100))
    for record in res.requests:
        assert list(record.to_dict().items()) == list(asdict(record).items())
    assert list(res.summary.to_dict().items()) == list(asdict(res.summary).items())


def test_percentile_nearest_rank_by_hand():
    assert percentile_nearest_rank([10, 20, 30, 40], 50) == 20      # ceil(0.5 x 4) = 2nd
    assert percentile_nearest_rank([10, 20, 30, 40], 99) == 40      # ceil(0.99 x 4) = 4th
    assert percentile_nearest_rank([], 50) is None


def test_duplicate_ids_are_refused():
    with pytest.raises(CourseInputError, match="appears twice"):
        simulate([Request("a", 0, 1, 1, 1), Request("a", 1, 1, 1, 1)], lesson_config())


# ------------------------------------------------------------------ traces

def test_trace_roundtrip_and_errors(tmp_path):
    trace = synthetic_trace(20, seed=7)
    path = write_trace(trace, tmp_path / "t.jsonl")
    assert read_trace(path) == trace
    assert synthetic_trace(20, seed=7) == trace and synthetic_trace(20, seed=8) != trace
    assert all(1 <= r.output_tokens <= r.max_new_tokens for r in trace)
    with pytest.raises(CourseInputError, match="line 2: not JSON"):
        parse_trace(['{"id": 1, "arrival_step": 0, "prompt_tokens": 1, "max_new_tokens": 1, "output_tokens": 1}',
                     "{oops"])
    with pytest.raises(CourseInputError, match="line 1: missing output_tokens"):
        parse_trace(['{"id": 1, "arrival_step": 0, "prompt_tokens": 1, "max_new_tokens": 1}'])
    with pytest.raises(CourseInputError, match="arrival_step=-1"):
        parse_trace(['{"id": 1, "arrival_step": -1, "prompt_tokens": 1, "max_new_tokens": 1, "output_tokens": 1}'])
    with pytest.raises(CourseInputError, match="is not a file"):
        read_trace(tmp_path / "missing.jsonl")


# ------------------------------------------------------------------ a literal reference simulator

def cdiv(a, b):
    return -(-a // b)


def reference_simulate(trace, cfg):
    """The module docstring's six rules, followed one request at a time (slow, obvious)."""
    B, N = cfg.block_size_tokens, cfg.num_blocks
    wm = int(cfg.watermark * N) if cfg.policy == PAGED else 0
    order = sorted(range(len(trace)), key=lambda k: (trace[k].arrival_step, k))
    st_ = {k: {"gen": 0, "tokens": 0, "blocks": 0, "admitted": None, "finished": None, "end": None,
               "pre": 0, "status": None} for k in order}
    queue, running, series = [], [], []
    t = 0
    while any(s["status"] is None for s in st_.values()):
        for k in order:
            r = trace[k]
            if r.arrival_step == t:
                if cdiv(r.prompt_tokens + r.max_new_tokens, B) > N - wm:
                    st_[k].update(status=REJECTED, end=t)
                else:
                    queue.append(k)
        preempted = False
        for k in list(running):
            if k not in running:
                continue
            if cfg.policy == PAGED and st_[k]["tokens"] % B == 0:
                while N - sum(st_[j]["blocks"] for j in running) == 0:
                    victim = running.pop()
                    st_[victim].update(tokens=0, blocks=0)
                    st_[victim]["pre"] += 1
                    queue.insert(0, victim)
                    preempted = True
                    if victim == k:
                        break
                if k in running:
                    st_[k]["blocks"] += 1
        for k in running:
            st_[k]["tokens"] += 1
            st_[k]["gen"] += 1
        if not preempted:
            while queue:
                k = queue[0]
                r = trace[k]
                start = r.prompt_tokens + st_[k]["gen"]
                need = cdiv(start, B) if cfg.policy == PAGED else cdiv(r.prompt_tokens + r.max_new_tokens, B)
                free = N - sum(st_[j]["blocks"] for j in running)
                if len(running) >= cfg.max_num_seqs or free - need < wm:
                    break
                queue.pop(0)
                running.append(k)
                st_[k].update(tokens=start, blocks=need)
                if st_[k]["admitted"] is None:
                    st_[k]["admitted"] = t
        if cfg.max_queue_len is not None:
            while (len(queue) > cfg.max_queue_len and trace[queue[-1]].arrival_step == t
                   and st_[queue[-1]]["admitted"] is None):
                st_[queue.pop()].update(status=REJECTED, end=t)
        if cfg.max_wait_steps is not None:
            for k in list(queue):
                if st_[k]["admitted"] is None and t - trace[k].arrival_step >= cfg.max_wait_steps:
                    queue.remove(k)
                    st_[k].update(status=REJECTED, end=t)
        series.append((sum(st_[k]["blocks"] for k in running), sum(st_[k]["tokens"] for k in running),
                       len(running), len(queue)))
        for k in list(running):
            if st_[k]["gen"] == trace[k].output_tokens:
                running.remove(k)
                st_[k].update(status=FINISHED, end=t, blocks=0, tokens=0)
        t += 1
    records = []
    for k in range(len(trace)):
        s = st_[k]
        queued_until = s["admitted"] if s["status"] == FINISHED else s["end"]
        records.append((s["status"], s["admitted"] if s["status"] == FINISHED else None,
                        s["end"] if s["status"] == FINISHED else None, queued_until - trace[k].arrival_step, s["pre"]))
    return records, series


@st.composite
def scenarios(draw, pressure: bool = False):
    """A random config and trace; ``pressure`` makes paged runs preempt (long outputs, no service limits)."""
    block = draw(st.integers(1, 8))
    per_token = draw(st.integers(1, 50))
    num_blocks = draw(st.integers(3, 40))
    kv_budget = num_blocks * block * per_token + draw(st.integers(0, block * per_token - 1))
    weights, workspace, reserve = (draw(st.integers(0, 10**6)) for _ in range(3))
    rules = dict(
        policy=PAGED if pressure else draw(st.sampled_from([RESERVE_MAX, PAGED])),
        block_size_tokens=block,
        watermark=draw(st.sampled_from([0.0, 0.01, 0.1, 0.25])),
        max_num_seqs=draw(st.sampled_from([1, 2, 3, 5, 256])),
        max_queue_len=None if pressure else draw(st.one_of(st.none(), st.integers(0, 4))),
        max_wait_steps=None if pressure else draw(st.one_of(st.none(), st.integers(0, 30))),
    )
    device = weights + workspace + reserve + kv_budget
    cfg = kv_config(device_bytes=device, weights_bytes=weights, workspace_bytes=workspace, reserve_bytes=reserve,
                    kv_bytes_per_token=per_token, **rules)
    # lengths scaled to the cache, so that some requests never fit and paged runs out of blocks
    capacity_tokens = num_blocks * block
    trace = []
    for k in range(draw(st.integers(1, 20))):
        max_new = draw(st.integers(1, max(1, capacity_tokens // 2)))
        output = draw(st.integers(max(1, max_new * 3 // 4), max_new)) if pressure else draw(st.integers(1, max_new))
        arrival = draw(st.integers(0, 3 if pressure else 20))
        prompt = draw(st.integers(1, max(1, capacity_tokens // (4 if pressure else 1) * 2 // 3)))
        trace.append(Request(k, arrival, prompt, max_new, output))
    return device, weights, workspace, reserve, cfg, trace


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_invariants_and_agreement_with_the_reference(scenario):
    check_invariants_and_reference(*scenario)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(pressure=True))
def test_paged_under_pressure_preempts_and_still_agrees(scenario):
    check_invariants_and_reference(*scenario)


def check_invariants_and_reference(device, weights, workspace, reserve, cfg, trace):
    res = simulate(trace, cfg)
    safe_kv_bytes = device - reserve - weights - workspace
    steps = res.steps
    # the budget is never crossed, under any policy, at any step
    assert max(steps["kv_bytes"]) <= safe_kv_bytes, "KV memory crossed the safe budget"
    assert all(tb <= kb for tb, kb in zip(steps["token_bytes"], steps["kv_bytes"]))
    # every request ends finished or rejected, with a reason
    for req, rec in zip(trace, res.requests):
        assert rec.id == req.id and rec.status in (FINISHED, REJECTED) and rec.reason
        if rec.status == FINISHED:
            assert rec.finished_step - rec.admitted_step >= req.output_tokens
            if rec.preemptions == 0:
                assert rec.finished_step - rec.admitted_step == req.output_tokens
        # preempted requests still finish
        if rec.preemptions:
            assert rec.status == FINISHED
    # reserve-max admits first come, first served and never preempts
    if cfg.policy == RESERVE_MAX:
        admitted = [rec.admitted_step for _, rec in sorted(zip(trace, res.requests),
                                                          key=lambda p: p[0].arrival_step)
                    if rec.status == FINISHED]
        assert admitted == sorted(admitted), "reserve-max admitted out of arrival order"
        assert res.summary.preemptions == 0
    # a request is rejected as never fitting exactly when its whole life needs more blocks than exist
    usable = cfg.num_blocks - (int(cfg.watermark * cfg.num_blocks) if cfg.policy == PAGED else 0)
    for req, rec in zip(trace, res.requests):
        never = cdiv(req.prompt_tokens + req.max_new_tokens, cfg.block_size_tokens) > usable
        assert never == rec.reason.startswith("never fits")
    s = res.summary
    if s.kv_utilization is not None:
        assert s.kv_utilization + s.internal_fragmentation + s.reserved_unused == pytest.approx(1.0)
    # and the fast simulator agrees with the literal one, record by record and step by step
    ref_records, ref_series = reference_simulate(trace, cfg)
    got = [(r.status, r.admitted_step, r.finished_step, r.queued_steps, r.preemptions) for r in res.requests]
    assert got == ref_records
    got_series = list(zip(res.blocks_used, res.token_counts, res.active, res.queued))
    assert got_series == ref_series


def test_far_future_arrivals_are_refused():
    from course_lib.simulate import MAX_ARRIVAL_STEP

    with pytest.raises(CourseInputError, match="arrival_step=.* is beyond step"):
        simulate([Request("late", MAX_ARRIVAL_STEP + 1, 1, 1, 1)], lesson_config())


# ------------------------------------------------------------------ the phases, one at a time, by hand

def test_phases_of_the_paged_eleven_by_hand():
    # The same run as test_paged_admits_all_eleven_then_preempts_the_youngest, phase by phase.
    from course_lib.simulate.engine import _Simulation

    sim = _Simulation(eleven(), lesson_config(PAGED))
    sim.arrive(0)
    assert len(sim.waiting) == 11 and sim.next_arrival_step is None
    assert sim.decode(0) is False                       # nothing runs yet
    sim.admit(0)
    # 11 prompts of 608 tokens = 38 blocks each = 418 blocks; 715 - 418 = 297 free (>= the 7-block watermark)
    assert (len(sim.running), sim.blocks_used, sim.free_blocks, sim.tokens_held) == (11, 418, 297, 11 * 608)
    # 608 tokens fill 38 blocks exactly, so token 609 (step 1) opens the 39th: all eleven claim at t % 16 == 1
    assert sim.claims_by_phase[1] == 11 and sum(sim.claims_by_phase) == 11
    sim.apply_service_policy(0)
    sim.record()
    sim.finish(0)
    # all eleven are due at step 0 + 512; nothing else happens before that
    assert sim.next_event_step(1) == 512
    # decode alone from step 1: 11 blocks at steps 1, 17, 33, ...; 297 // 11 = 27 rounds fill the cache by
    # step 1 + 26 x 16 = 417, so steps 1..432 pass quietly and step 433 must preempt
    assert sim.quiet_steps(1, 512) == 433
    assert (sim.blocks_used, sim.free_blocks) == (715, 0)
    assert sim.tokens_held == 11 * (608 + 432)
    assert sim.series.blocks_used[:2] == [418, 429] and sim.series.blocks_used[16:18] == [429, 440]
    assert len(sim.series.blocks_used) == 433                  # steps 0..432 recorded
    assert sim.decode(433) is True
    victim = sim.resumed[0]
    # the youngest (r10) leaves with its 432 tokens generated: 608 + 432 = 1,040 tokens = 65 blocks freed,
    # then the ten remaining claim their 66th block each
    assert (victim.id, victim.generated_tokens, victim.preemptions) == ("r10", 432, 1)
    assert (sim.blocks_used, sim.free_blocks) == (10 * 66, 715 - 660)


def test_reserve_max_quiet_steps_count_touched_blocks_apart_from_reserved():
    # One request, prompt 16, max_new 64 (80 tokens = 5 blocks reserved), 1 B per token, 16-token blocks.
    # It holds 16 + k tokens at step k: one block holds a token at step 0, two from step 1 (token 17).
    from course_lib.simulate.engine import _Simulation

    sim = _Simulation([Request("only", 0, 16, 64, 16)], AdmissionConfig(kv_budget_bytes=160, kv_bytes_per_token=1))
    sim.arrive(0)
    sim.admit(0)
    sim.record()
    assert sim.quiet_steps(1, 16) == 16
    assert sim.series.blocks_used == [5] * 16
    assert sim.series.blocks_touched == [1] + [2] * 15
    assert sim.series.tokens_held == list(range(16, 32))


def test_simulate_leaves_the_garbage_collector_as_it_found_it():
    import gc

    simulate(eleven()[:2], lesson_config())
    assert gc.isenabled()
    with pytest.raises(CourseInputError):
        simulate([Request("a", 0, 1, 1, 1), Request("a", 1, 1, 1, 1)], lesson_config())
    assert gc.isenabled()
    gc.disable()
    try:
        simulate(eleven()[:2], lesson_config())
        assert not gc.isenabled()
    finally:
        gc.enable()
