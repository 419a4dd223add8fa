"""REPORT.md lines for the issue-28 parts of the scale*.json results: the one-document Milvus publish
(`scale_publish_milvus.json`), the encoders on the shared sets (`scale_encoder_sets.json`), `ragsieve index` chunks
per CPU-second and Ray throughput (`index_chunks_per_cpu_s`, `ray` in `scale*.json`)."""
from __future__ import annotations

from report_sections import _f, _table


def scale_out_lines(data: dict) -> list[str]:
    return _milvus_publish(data) + _encoder_sets(data) + _index_cpu(data) + _ray(data)


def _milvus_publish(data: dict) -> list[str]:
    sizes = data.get("sizes") or {}
    if not sizes or "summary" not in data:
        return []
    rows = []
    for n, modes in sizes.items():
        for mode, r in modes.items():
            opened = r.get("server_open_s") if mode == "server" else r.get("engine_open_s")
            rows.append([n, mode, opened, r.get("load_collection_s"),
                         ", ".join(_f(x.get("publish_s")) for x in r.get("runs", [])),
                         ", ".join(f"{x.get('rows_written')}/{x.get('rows_retired')}" for x in r.get("runs", [])),
                         r.get("max_rss_gb"), _f((r.get("load_average") or [None])[0], 1)])
    return [f"One-document publish on Milvus ({data.get('engine')}; {data.get('vectors')}). server: each publish "
            "from a new process to a server holding the collection open; cold: a new process opening the "
            "milvus-lite file (its engine reads the collection first: 'open s'); warm: the same with a pointer from "
            "before the born record, loaded: its first publish looks the retired row up and reads the record from "
            "the collection once, the later ones do not. Target: flat in N, <= 2 s at 1M:", ""] + _table(
        ["chunks", "mode", "open s", "load s", "publishes s", "written/retired", "peak RSS GB", "load avg"], rows)


def _encoder_sets(data: dict) -> list[str]:
    sets = data.get("sets") or {}
    if not sets:
        return []
    rows = []
    for name, row in sets.items():
        for enc in row.get("order", []):
            r = row.get(enc) or {}
            rows.append([name, enc, r.get("chunks"), r.get("queries"), r.get("hybrid_ndcg@10"), r.get("dense_ndcg@10"),
                         r.get("hybrid_ndcg_difference", "-"), r.get("dense_ndcg_difference", "-"),
                         r.get("chunks_per_cpu_s"), _f(r.get("load_average"), 1)])
    verdict = "; ".join(f"{e}: within {data.get('tolerance_ndcg@10')} on all three = {v.get('within_tolerance_on_all')}"
                        f" (worst hybrid {v.get('worst_hybrid_difference')}, dense {v.get('worst_dense_difference')})"
                        for e, v in (data.get("verdict") or {}).items())
    return ["Encoders on the shared sets (whole corpus indexed by the builder, every test query with a qrel, "
            "document nDCG@10; the default encoder must stay within the tolerance of torch):", ""] + _table(
        ["set", "encoder", "chunks", "queries", "hybrid nDCG@10", "dense nDCG@10", "hybrid diff", "dense diff",
         "index chunks/CPU-s", "load avg"], rows) + ([verdict, ""] if verdict else []) + _with_earlier(data)


def _with_earlier(data: dict) -> list[str]:
    v = data.get("verdict_with_earlier_runs")
    if not v:
        return []
    return [f"With the earlier runs of the sets not completed here ({v.get('sets')}): hybrid differences "
            f"{v.get('hybrid_differences')}, dense {v.get('dense_differences')}; within 0.005 on all three = "
            f"{v.get('within_0.005_on_all_three')}. {data.get('stopped', '')}", ""]


def _index_cpu(data: dict) -> list[str]:
    cpu = data.get("index_chunks_per_cpu_s")
    if not cpu:
        return []
    rate = cpu.get("chunks_per_cpu_s_median") or {}
    return [f"`ragsieve index` end to end on {cpu.get('docs')} SciFact abstracts, the default encoder "
            f"({cpu.get('default_encoder')}) and torch alternated {cpu.get('rounds')} times: "
            + ", ".join(f"{e} {_f(v, 2)}" for e, v in rate.items())
            + f" chunks per CPU-second, ratio {cpu.get('ratio_default_over_torch')} (target >= 2).", ""]


def _ray(data: dict) -> list[str]:
    ray = data.get("ray")
    if not ray:
        return []
    rows = [[a, r.get("chunks"), r.get("total_s"), r.get("load_and_chunk_on_ray_s"), r.get("to_first_block_s"),
             r.get("steady_texts_per_s"), r.get("steady_per_actor"), _f(r.get("load_average"), 1)]
            for a, r in (ray.get("runs") or {}).items()]
    earlier = (data.get("earlier_parts") or {}).get("ray")
    return [f"Ray (`ragsieve index --ray`, local instance, {ray.get('docs')} SciFact abstracts, encoder "
            f"{ray.get('encoder')}, batch {ray.get('batch_size')})"
            + (f"; an EARLIER run, not the current code: {earlier}" if earlier else "") + ":", ""] + _table(
        ["actors", "chunks", "total s", "load+chunk on Ray s", "to first block s", "steady chunks/s",
         "per actor", "load avg"], rows)
