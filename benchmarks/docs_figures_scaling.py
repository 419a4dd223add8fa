"""The figures of docs/scaling.md besides the Milvus publish (`docs_figures_milvus`): SciFact retrieval, the
local one-document publish, the encoders on the shared sets, index chunks per CPU-second, Ray, and the command
and load average of a run. Each function reads named result files through `Results` and returns the words
between one marker pair (`docs_markers`); a comparison the prose depends on is said by the function too."""
from __future__ import annotations

from statistics import median

from docs_markers import Results, figure, fixed, signed, span
from report_figure_rows import Data

SETS = {"hotpotqa": "HotpotQA", "squad2": "SQuAD 2.0", "scifact": "SciFact"}  # the page's order and names
# The arithmetic for N nodes: an example cluster (not a measurement) and a corpus to embed.
EXAMPLE_NODES, EXAMPLE_CORES, EXAMPLE_CHUNKS = 10, 8, 10_000_000


def size_label(chunks: int) -> str:
    """10001 -> '10k', 1000000 -> '1M' (the page's corpus sizes)."""
    for unit, scale in (("M", 1_000_000), ("k", 1_000)):
        if chunks >= scale:
            return f"{chunks / scale:.3g}{unit}"
    return str(chunks)


def loads(data: object) -> list[float]:
    """Every 1-minute load average a result file records, at its start and end and per run."""
    found: list[float] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if "load_average" in key and isinstance(value, list) and value:
                found.append(float(value[0]))
            elif "load_average" in key and isinstance(value, int | float):
                found.append(float(value))
            else:
                found += loads(value)
    elif isinstance(data, list):
        for item in data:
            found += loads(item)
    return found


@figure("command")
def command(results: Results, file: str) -> str:
    return f"`{results(file)['command']}`"


def load_range(results: Results, files: tuple[str, ...], digits: int = 1) -> str:
    """The range of the load averages the files record (start, end, per run), at `digits` decimals."""
    return span([x for name in files for x in loads(results(name))], digits)


@figure("load")
def load(results: Results, *files: str) -> str:
    return load_range(results, files)


@figure("load-start")
def load_start(results: Results, file: str) -> str:
    return fixed(results(file)["load_average_at_start"][0], 1)


@figure("scifact-ndcg")
def scifact_ndcg(results: Results) -> str:
    """First-stage nDCG@10 on SciFact by method (the published BM25 figures beside it are the page's text)."""
    data = results("retrieval_scifact.json")
    m, index = data["methods"], data["index"]
    return (f"SciFact (BEIR {data['split']}, {data['queries']} queries, a document ranked at its best chunk; the "
            f"default index: {index['chunk_tokens']}-token chunks, `{index['manifest']['embedding']['encoder']}` "
            f"MiniLM): nDCG@10 **{fixed(m['hybrid_weighted']['ndcg@10'], 3)}** with the default weighted fusion "
            f"(RRF {fixed(m['hybrid_rrf']['ndcg@10'], 3)}), BM25 alone {fixed(m['bm25s']['ndcg@10'], 3)}, dense "
            f"alone {fixed(m['dense']['ndcg@10'], 3)}")


@figure("local-publish")
def local_publish(results: Results) -> str:
    """The local backend's one-document publish: median per corpus size, samples, load, the file's embedding."""
    data = results("scale-local-publish.json")
    sizes = data["sizes"]
    medians = [f"{s['publish_s_median_one_file']:.2g} s at {size_label(s['chunks'])}" for s in sizes]
    medians[0] += " chunks"
    samples = {sum(r["given"] == "one file" for r in s["runs"]) for s in sizes}
    own = data["own_embedding"]
    return (f"a median of {', '.join(medians[:-1])} and {medians[-1]} (`benchmarks/results/scale-local-publish.json`: "
            f"hash vectors, {'/'.join(str(n) for n in sorted(samples))} samples per size on a "
            f"2-core machine at load {span(loads(data))}), plus the file's own embedding "
            f"({fixed(median(own['embed_s']), 3)} s with `{own['encoder']}`, warm)")


def _sets(data: Data) -> list[tuple[str, Data, Data]]:
    """(set name, torch, onnx-int8) in the page's order."""
    return [(SETS[key], data["sets"][key]["torch"], data["sets"][key]["onnx-int8"]) for key in SETS
            if key in data["sets"]]


def _worst(data: Data) -> tuple[float, str, str]:
    return min((int8[f"{kind}_ndcg_difference"], name, kind) for name, _t, int8 in _sets(data)
               for kind in ("hybrid", "dense"))


@figure("encoder-tolerance")
def encoder_tolerance(results: Results) -> str:
    return fixed(results("scale_encoder_sets.json")["tolerance_ndcg@10"], 3)


@figure("encoder-within")
def encoder_within(results: Results) -> str:
    """Whether onnx-int8 stays within the tolerance of torch on every set, hybrid and dense."""
    data = results("scale_encoder_sets.json")
    tolerance = data["tolerance_ndcg@10"]
    within = abs(_worst(data)[0]) <= tolerance and data["verdict"]["onnx-int8"]["within_tolerance_on_all"]
    return f"{'within' if within else 'not within'} {fixed(tolerance, 3)} nDCG@10"


@figure("encoder-worst")
def encoder_worst(results: Results) -> str:
    value, name, kind = _worst(results("scale_encoder_sets.json"))
    return f"{name} {kind} {signed(value)}"


@figure("encoder-diffs")
def encoder_diffs(results: Results) -> str:
    """onnx-int8 minus torch, hybrid / dense nDCG@10, per set."""
    return ", ".join(f"{name} {signed(int8['hybrid_ndcg_difference'])} / {signed(int8['dense_ndcg_difference'])}"
                     for name, _torch, int8 in _sets(results("scale_encoder_sets.json")))


@figure("encoder-speedup")
def encoder_speedup(results: Results) -> str:
    """The range of onnx-int8's index chunks per CPU-second over torch's."""
    return span([int8["index_cpu_ratio_vs_torch"] for _n, _t, int8 in _sets(results("scale_encoder_sets.json"))])


def _corpus(results: Results, key: str, chunks: int) -> str:
    """'1,021 docs = 1,113 chunks' when a retrieval run indexed the same corpus to as many chunks, else chunks."""
    counts = results(f"eval_{key}_retrieval.json")["index"]["counts"]
    if counts["chunks"] == chunks:
        return f"{counts['documents']:,} docs = {chunks:,} chunks"
    return f"{chunks:,} chunks"


@figure("encoder-table")
def encoder_table(results: Results) -> str:
    """torch against onnx-int8 per set: nDCG@10 hybrid / dense, index chunks per CPU-second, the run's commit."""
    data = results("scale_encoder_sets.json")
    commit = str(data["commit"])[:7]
    lines = ["| set | torch hybrid / dense | onnx-int8 hybrid / dense | index chunks per CPU-second torch -> int8 | run |",
             "|---|---|---|---|---|"]
    for key in (k for k in SETS if k in data["sets"]):
        torch, int8 = data["sets"][key]["torch"], data["sets"][key]["onnx-int8"]
        lines.append(
            f"| {SETS[key]} ({_corpus(results, key, torch['chunks'])}, {torch['queries']:,} queries) "
            f"| {fixed(torch['hybrid_ndcg@10'], 4)} / {fixed(torch['dense_ndcg@10'], 4)} "
            f"| {fixed(int8['hybrid_ndcg@10'], 4)} / {fixed(int8['dense_ndcg@10'], 4)} "
            f"({signed(int8['hybrid_ndcg_difference'])} / {signed(int8['dense_ndcg_difference'])}) "
            f"| {fixed(torch['chunks_per_cpu_s'], 1)} -> {fixed(int8['chunks_per_cpu_s'], 1)} "
            f"({fixed(int8['index_cpu_ratio_vs_torch'], 2)}x) | commit {commit} |")
    return "\n".join(lines)


@figure("index-cpu")
def index_cpu(results: Results, part: str) -> str:
    """`scale_cpu_ray.json`'s whole-build chunks per CPU-second, default encoder against torch: `rates`, `ratio`,
    `sample` (documents = chunks) or `rounds` (how many times they alternated)."""
    cpu = results("scale_cpu_ray.json")["index_chunks_per_cpu_s"]
    default, rates = cpu["default_encoder"], cpu["chunks_per_cpu_s_median"]
    chunks = {s["chunks"] for samples in cpu["samples"].values() for s in samples}
    phrases = {
        "rates": lambda: (f"{default} {fixed(rates[default], 1)} chunks per CPU-second, torch "
                          f"{fixed(rates['torch'], 1)}: **{fixed(cpu['ratio_default_over_torch'], 2)}x**"),
        "ratio": lambda: f"{fixed(cpu['ratio_default_over_torch'], 2)}x",
        "sample": lambda: f"{cpu['docs']} SciFact abstracts = {'/'.join(f'{c:,}' for c in sorted(chunks))} chunks",
        "rounds": lambda: str(cpu["rounds"]),
    }
    return phrases[part]()


@figure("index-cpu-run")
def index_cpu_run(results: Results) -> str:
    """A whole `ragsieve index` on the CPU (`benchmarks/gpu.py --device cpu`): chunks and chunks/s."""
    row = next(r for r in results("indexing-cpu.json")["rows"] if r["path"] == "ragsieve")
    return f"{row['chunks']:,} SciFact chunks ran at {fixed(row['chunks_per_s'], 1)} chunks/s"


@figure("ray-run")
def ray_run(results: Results, actors: str) -> str:
    """The Ray build with `actors` encoder actors: total time, loading + chunking, steady chunks/s."""
    run = results("scale_cpu_ray.json")["ray"]["runs"][actors]
    head = f"{actors} actor{'s' if actors != '1' else ''}: {fixed(run['total_s'], 1)} s in all"
    if actors == "1":
        return (f"{head} (loading + chunking on Ray {fixed(run['load_and_chunk_on_ray_s'], 1)} s, including Ray Data "
                f"start-up), **{fixed(run['steady_texts_per_s'], 1)} chunks/s** steady between the first and the "
                f"last block")
    return (f"{head}, **{fixed(run['steady_texts_per_s'], 1)} chunks/s**, {fixed(run['steady_per_actor'], 1)} "
            f"per actor")


@figure("ray-sample")
def ray_sample(results: Results) -> str:
    ray = results("scale_cpu_ray.json")["ray"]
    chunks = {run["chunks"] for run in ray["runs"].values()}
    return (f"{ray['docs']} SciFact abstracts = {'/'.join(f'{c:,}' for c in sorted(chunks))} chunks, the "
            f"`{ray['encoder']}` encoder, batch size {ray['batch_size']}")


def _per_actor(results: Results) -> float:
    """The per-actor rate with the most actors (one per core)."""
    runs = results("scale_cpu_ray.json")["ray"]["runs"]
    return float(runs[max(runs, key=int)]["steady_per_actor"])


@figure("ray-per-actor")
def ray_per_actor(results: Results) -> str:
    return fixed(_per_actor(results), 1)


@figure("ray-load-chunk")
def ray_load_chunk(results: Results) -> str:
    runs = results("scale_cpu_ray.json")["ray"]["runs"].values()
    chunks = {run["chunks"] for run in runs}
    return (f"{'/'.join(f'{c:,}' for c in sorted(chunks))} chunks on Ray took "
            f"{span([run['load_and_chunk_on_ray_s'] for run in runs])} s")


def _hours(rate: float) -> str:
    return fixed(EXAMPLE_CHUNKS / rate / 3600, 1)


@figure("ray-arithmetic")
def ray_arithmetic(results: Results) -> str:
    """The example cluster at the measured per-actor rate, and at the whole-build rates of the two runs."""
    r = _per_actor(results)
    nodes = EXAMPLE_NODES * EXAMPLE_CORES
    embed = round(nodes * round(r), -2)
    lo, hi = sorted(round(x, -1) for x in _whole_build(results).values())
    return (f"{EXAMPLE_NODES} nodes x {EXAMPLE_CORES} cores x {round(r)} = ~{embed:,.0f} chunks/s and "
            f"{EXAMPLE_CHUNKS / 1e6:.0f}M chunks in ~{_hours(nodes * r)} h of embedding with `onnx-int8` (at the "
            f"whole-build rate of ~{lo:.0f}-{hi:.0f} per core-second: {nodes * lo:,.0f}-{nodes * hi:,.0f} chunks/s, "
            f"{_hours(nodes * hi)}-{_hours(nodes * lo)} h)")


def _whole_build(results: Results) -> dict[str, float]:
    """onnx-int8's whole-build chunks per CPU-second: the interleaved SciFact-abstracts run, HotpotQA's build."""
    cpu = results("scale_cpu_ray.json")["index_chunks_per_cpu_s"]
    sets = results("scale_encoder_sets.json")["sets"]
    return {"above": float(cpu["chunks_per_cpu_s_median"]["onnx-int8"]),
            "HotpotQA": float(sets["hotpotqa"]["onnx-int8"]["chunks_per_cpu_s"])}


@figure("ray-whole-build")
def ray_whole_build(results: Results) -> str:
    """The whole-build rates, each said against the per-actor rate r."""
    rates, r = _whole_build(results), _per_actor(results)
    above, hotpot = rates["above"], rates["HotpotQA"]
    w_above, w_hotpot = ("lower" if x < r else "higher" for x in (above, hotpot))
    if w_above == w_hotpot:
        return (f"a whole build's CPU-time rate is {w_above} (`onnx-int8` {fixed(above, 1)} chunks per CPU-second "
                f"above, {fixed(hotpot, 1)} on HotpotQA in `scale_encoder_sets.json`)")
    return (f"a whole build's CPU-time rate is {w_above} on the SciFact abstracts above (`onnx-int8` {fixed(above, 1)} "
            f"chunks per CPU-second) and {w_hotpot} on HotpotQA ({fixed(hotpot, 1)} in `scale_encoder_sets.json`)")
