#!/usr/bin/env python3
"""Tests of the benchmark tooling (run by ctest as `bench_tools`): bench_graph_opt's JSON in quick
mode, make_table.py's tables, summary.json and target verdicts on small fixtures,
onnx_architectures.py's tables, conv_bound.py's reading of oneDNN's verbose lines with the
GEMM shapes tool it drives, and transformer_bound.py's products and refusals. No timing is
asserted: the figures only have to be present and well-formed.

  BENCH_GRAPH_OPT=build/release/bench_graph_opt BENCH_GEMM_SHAPES=build/release/bench_gemm_shapes \
      python3 bench/test_bench_tools.py
"""
import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import conv_bound  # noqa: E402
import make_table  # noqa: E402
import onnx_architectures  # noqa: E402
import transformer_bound  # noqa: E402

MODELS = ("mlp", "cnn", "transformer block")


def cpu_fixture():
    return {
        "tool": "bench_cpu", "quick": True, "measured_utc": "2026-01-01 00:00",
        "machine": {"cpu": "test cpu", "hardware_threads": 2, "threads_used": 2},
        "versions": {"bench_built_with": "g++ 12", "compiler": "c++ 12", "openblas": "libopenblas.so"},
        "gelu": {"shape": "[4, 1000, 4096]", "cpu_ms": 1.0, "reference_ms": 30.0, "reference_reps": 1,
                 "cpu_gbps": 12.0, "memcpy_best_gbps": 15.0, "memcpy_fresh_dst_gbps": 11.0,
                 "fraction_of_memcpy": 0.9, "max_abs_diff_vs_reference": 1e-7},
        "models": [
            {"model": m, "flops": 1e9, "cpu_ms": 1.0, "cpu_gflops": 100.0, "reference_ms": 3.0, "reference_reps": 3,
             "max_abs_diff_vs_reference": 1e-7, "compile_cold_ms": 500.0, "compile_warm_memory_ms": 1.0,
             "compile_warm_disk_ms": 1.0, "compile_warm_disk_child_process_ms": 5.0, "warm_disk_was_cache_hit": True}
            for m in ("mlp (batch 128)", "cnn (batch 2, 3x224x224)")],
        "gemm": {"n": 1024, "ms": 10.0, "gflops": 200.0},
    }


def peers_fixture():
    ok = {"status": "ok", **{k: {"ms": 2.0, "reps": 5, "first_ms": 50.0} for k in ("gelu", "mlp", "cnn")}}
    return {"tool": "peers.py", "quick": True, "machine": {"cpu": "test cpu", "hardware_threads": 2, "threads_used": 2},
            "versions": {"python": "3.11", "numpy": "2.0", "torch": "9.9", "jax": "8.8"},
            "workloads": {}, "peers": {"torch eager": copy.deepcopy(ok), "torch.compile": copy.deepcopy(ok),
                                       "jax jit": copy.deepcopy(ok)}}


def run_make_table(files, *extra):
    """make_table.py on the given files only: it runs in an empty folder, so the defaults for the
    files not given (bench/results/...) do not exist there."""
    args = [sys.executable, os.path.join(HERE, "make_table.py")]
    for flag, path in files.items():
        args += [flag, os.path.abspath(path)]
    with tempfile.TemporaryDirectory() as cwd:
        return subprocess.run(args + list(extra), check=True, capture_output=True, text=True, cwd=cwd).stdout


class BenchGraphOpt(unittest.TestCase):
    def test_quick_json_has_machine_versions_both_modes_and_ratios(self):
        exe = os.environ.get("BENCH_GRAPH_OPT")
        if not exe:
            self.skipTest("BENCH_GRAPH_OPT is not set (ctest sets it)")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "graph_opt.json")
            subprocess.run([exe, "--quick", out], check=True, capture_output=True)
            with open(out) as f:
                go = json.load(f)
        self.assertEqual(go["tool"], "bench_graph_opt")
        self.assertTrue(go["quick"])
        self.assertTrue(go["measured_utc"])
        self.assertEqual(set(go["machine"]), {"cpu", "hardware_threads", "threads_used"})
        self.assertIn("bench_built_with", go["versions"])
        seen = {(r["model"].split(" (")[0], r["mode"]) for r in go["models"]}
        self.assertEqual(seen, {(m, mode) for m in MODELS for mode in ("inference", "training")})
        for r in go["models"]:
            self.assertGreater(r["nodes_before"], 0)
            self.assertGreater(r["nodes_after"], 0)
            self.assertGreaterEqual(r["planned_peak_bytes"], r["lower_bound_bytes"])
            self.assertLessEqual(r["planned_peak_bytes"], r["unplanned_bytes"])
            self.assertAlmostEqual(r["planned_over_lower_bound"], r["planned_peak_bytes"] / r["lower_bound_bytes"], 4)
            self.assertAlmostEqual(r["planned_over_unplanned"], r["planned_peak_bytes"] / r["unplanned_bytes"], 4)
        self.assertEqual(len(go["mixed_precision"]), 4)


class MakeTable(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, data):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            json.dump(data, f)
        return path

    def test_missing_figures_are_not_measured_never_met(self):
        cpu, peers = cpu_fixture(), peers_fixture()
        cpu["models"][0]["compile_warm_disk_child_process_ms"] = -1  # the child process failed
        cpu["gelu"]["cpu_ms"] = -1                                    # not measured
        peers["peers"]["jax jit"]["cnn"] = {"error": "RuntimeError: out of memory"}
        text = run_make_table({"--cpu": self.write("cpu.json", cpu), "--peers": self.write("peers.json", peers)})
        targets = text[text.index("Issue 3 targets"):]
        self.assertIn("memcpy bandwidth: not measured.", targets)
        self.assertIn("JAX jit on every row: **not measured** (gelu: ingot cpu not measured; "
                      "cnn: JAX jit not measured)", targets)
        self.assertRegex(targets, r"warm-cache load under 10 ms .*— not measured\.")
        self.assertNotIn("— met", targets)
        self.assertNotIn("**met**", targets)

    def test_a_slower_peer_is_not_met_even_with_a_missing_one(self):
        cpu, peers = cpu_fixture(), peers_fixture()
        peers["peers"]["torch.compile"]["mlp"]["ms"] = 0.5
        peers["peers"]["jax jit"]["cnn"] = {"error": "failed"}
        text = run_make_table({"--cpu": self.write("cpu.json", cpu), "--peers": self.write("peers.json", peers)})
        self.assertIn("**not met** (mlp: torch.compile 2.00× faster; cnn: JAX jit not measured)", text)

    def test_summary_has_every_ratio_and_the_peers_versions(self):
        cpu, peers = cpu_fixture(), peers_fixture()
        go = {"tool": "bench_graph_opt", "quick": True, "machine": cpu["machine"], "versions": {"bench_built_with": "g++"},
              "models": [{"model": "mlp (batch 128)", "mode": "training", "nodes_before": 10, "nodes_after": 8,
                          "fusion_groups": 3, "planned_peak_bytes": 200, "unplanned_bytes": 800,
                          "lower_bound_bytes": 100, "inplace": 1}],
              "mixed_precision": [{"model": "mlp", "type": "float16", "max_abs_error": 1e-4, "max_rel_error": 1e-3}]}
        summary = os.path.join(self.dir.name, "summary.json")
        out = run_make_table({"--cpu": self.write("cpu.json", cpu), "--peers": self.write("peers.json", peers),
                              "--graph-opt": self.write("graph_opt.json", go)},
                             "--summary", summary, "--print-ratios")
        with open(summary) as f:
            s = json.load(f)
        self.assertEqual(s["versions"]["peers"]["torch"], "9.9")
        self.assertEqual(s["machine"]["graph_opt"]["cpu"], "test cpu")
        inf = s["ratios"]["inference_over_ingot_cpu"]
        self.assertAlmostEqual(inf["mlp"]["torch eager"], 2.0)
        self.assertAlmostEqual(inf["gelu"]["ingot reference"], 30.0)
        self.assertIsNone(inf["cnn"]["onnxruntime"])  # not run: null, printed as "not measured"
        self.assertAlmostEqual(s["ratios"]["graph_opt"]["mlp (batch 128), training"]["planned_over_lower_bound"], 2.0)
        self.assertRegex(out, r"inference_over_ingot_cpu / mlp / torch eager +2\.000")
        self.assertRegex(out, r"inference_over_ingot_cpu / cnn / onnxruntime +not measured")
        # the graph-optimization table is rendered from graph_opt.json
        table = run_make_table({"--cpu": self.write("cpu.json", cpu), "--graph-opt": self.write("graph_opt.json", go)})
        self.assertIn("### Graph optimization and memory planning", table)
        self.assertIn("| mlp (batch 128) | training | 10 | 8 | 3 | 0.00 | 0.00 | 0.00 | 2.000 | 0.250 | 1 |", table)
        self.assertIn("| mlp | float16 | 1.000e-04 | 1.000e-03 |", table)

    def test_training_table_prints_the_gemm_bound_beside_each_step(self):
        row = lambda key, shape, flops, ms: {
            "key": key, "workload": key, "input_shape": shape, "flops": flops, "compiled_step_ms": ms,
            "eager_ms": 2 * ms, "loss_difference": 0.0,
            "memory": {"peak_bytes": 1 << 20, "checkpointed_bytes": 1 << 20, "recomputed_nodes": 0}}
        # 100 GFLOP/s peak: the MLP's 0.1 GFLOP needs 1 ms at least, the CNN's 50 GFLOP 500 ms.
        train = {"tool": "bench_train", "quick": True, "optimizer": "SGD",
                 "rows": [row("train_mlp", [128, 784], 1e8, 2.0), row("train_cnn", [32, 3, 64, 64], 5e10, 800.0)],
                 "gemm": {"n": 1024, "ms": 21.5, "gflops": 100.0}}
        ok = lambda ms: {"status": "ok", "train_mlp": {"ms": ms}, "train_cnn": {"ms": 400 * ms}}
        ptrain = {"tool": "peers_train.py", "workloads": {"train_mlp": {"input_shape": [128, 784]},
                                                        "train_cnn": {"input_shape": [32, 3, 64, 64]}},
                  "peers": {"torch eager": ok(3.0), "torch.compile": ok(3.0), "jax jit": ok(3.0)}}
        text = run_make_table({"--cpu": self.write("cpu.json", cpu_fixture()), "--train": self.write("t.json", train),
                               "--peers-train": self.write("pt.json", ptrain)})
        self.assertIn("| train_mlp | 2.00 ms | 50.0 (50%) | 1.00 ms | 4.00 ms (2.00×) | 3.00 ms (1.50×) |", text)
        self.assertIn("| train_cnn | 800.0 ms | 62.5 (62%) | 500.0 ms |", text)
        self.assertIn("Library GEMM peak in this run: 100.0 GFLOP/s", text)
        # half of eager (1.5 ms) is above the 1 ms floor: reachable, at 67% of the peak
        self.assertIn("Half of PyTorch eager's time is 1.50 ms; at the GEMM peak the step's dense work alone takes "
                      "1.00 ms, so reaching it needs 67% of the GEMM peak (the compiled step runs at 50%).", text)
        # three times the CNN's work: its 1.5 s floor is above half of PyTorch eager (600 ms)
        train["rows"][1]["flops"] = 1.5e11
        text = run_make_table({"--cpu": self.write("cpu.json", cpu_fixture()), "--train": self.write("t.json", train),
                               "--peers-train": self.write("pt.json", ptrain)})
        self.assertIn("at the GEMM peak the step's dense work alone takes 1.50 s, so it would take more than the "
                      "library GEMM's peak.", text)
        # an older train.json without FLOPs or the peak says so
        for r in train["rows"]:
            del r["flops"]
        text = run_make_table({"--cpu": self.write("cpu.json", cpu_fixture()), "--train": self.write("t.json", train)})
        self.assertIn("| train_mlp | 2.00 ms | not measured | not measured | 4.00 ms (2.00×) |", text)

    def test_readme_rewrite_keeps_hand_written_notes_in_their_subsection(self):
        readme = os.path.join(self.dir.name, "README.md")
        with open(readme, "w") as f:
            f.write("# x\n\n## Benchmarks\n\nold\n\n### Graph optimization and memory planning\n\nold table\n\n"
                    f"{make_table.NOTES_OPEN}\nmy note\n{make_table.NOTES_CLOSE}\n\n## After\n\nkept\n")
        go = {"models": [], "mixed_precision": []}
        run_make_table({"--cpu": self.write("cpu.json", cpu_fixture()), "--graph-opt": self.write("g.json", go),
                        "--readme": readme})
        with open(readme) as f:
            text = f.read()
        self.assertNotIn("old table", text)
        self.assertLess(text.index("### Graph optimization"), text.index("my note"))
        self.assertLess(text.index("my note"), text.index("## After"))
        self.assertEqual(text.count("my note"), 1)
        self.assertTrue(text.endswith("## After\n\nkept\n"))


class OnnxArchitecturesTables(unittest.TestCase):

    def test_tables_give_the_worst_cpu_variant_and_each_rounds_range(self):
        errors = {"reference": 1e-7, "cpu": 2e-7, "nhwc": 5e-7, "level none": 3e-7}
        checked = {"models": [{"model": "m", "input_shape": [2, 3, 64, 64], "errors": errors},
                              {"model": "bad", "input_shape": [2, 3, 64, 64], "import_error": "no conversion for X"}]}
        lines = onnx_architectures.table(checked).splitlines()
        self.assertEqual(lines[2], "| m | 2x3x64x64 | 1.0e-07 | 5.0e-07 (nhwc) |")
        self.assertIn("not imported: no conversion for X", lines[3])
        rounds = [{"ingot_ms": 10.0, "onnxruntime_ms": 12.0}, {"ingot_ms": 8.0, "onnxruntime_ms": 12.0}]
        timed = {"models": [{"model": "m", "input_shape": [1, 3, 224, 224], "error": 1e-7, "rounds": rounds}]}
        self.assertEqual(onnx_architectures.table(timed, timed=True).splitlines()[2],
                         "| m | 1x3x224x224 | 8.0-10.0 | 12.0-12.0 | 1.20-1.50× | 1.0e-07 |")


class ConvBound(unittest.TestCase):
    WINO = ("onednn_verbose,exec,cpu,convolution,jit_wino_4x3:avx512_core,forward_inference,src_f32::blocked:aBcd16b:f0 "
            "wei_f32::wino::f0 bia_undef::undef::f0 dst_f32::blocked:aBcd16b:f0,attr-post-ops:eltwise_relu ,alg:convolution_winograd,"
            "mb8_ic64oc64_ih56oh56kh3sh1dh0ph1_iw56ow56kw3sw1dw0pw1,2.0")
    GROUPED = ("onednn_verbose,exec,cpu,convolution,jit:avx512_core,forward_inference,src_f32::blocked:aBcd16b:f0 "
               "wei_f32::blocked:gOIhw16i16o:f0 bia_undef::undef::f0 dst_f32::blocked:aBcd16b:f0,,alg:convolution_direct,"
               "mb8_g2ic64oc128_ih28oh14kh3sh2dh0ph1_iw28ow14kw3sw2dw0pw1,1.5")

    def test_the_last_calls_convolutions_and_their_gemm_work(self):
        reorder = "onednn_verbose,exec,cpu,reorder,jit:uni,undef,src_f32::blocked:abcd:f0 dst_f32::blocked:aBcd16b:f0,,,8x3x224x224,0.5"
        calls = [self.WINO.replace(",2.0", f",{9 + i}.0") + "\n" + reorder + "\n" + self.GROUPED
                 for i in range(conv_bound.CALLS)]
        convs = conv_bound.parse_convs("onednn_verbose,info,cpu,runtime:OpenMP\n" + "\n".join(calls) + "\n")
        self.assertEqual(convs, [("jit_wino_4x3:avx512_core", (8, 1, 64, 64, 56, 56, 3, 3), 12.0),
                                 ("jit:avx512_core", (8, 2, 64, 128, 14, 14, 3, 3), 1.5)])
        # Per group: [8 x 14 x 14, 32 x 9] x [32 x 9, 64], twice; the Winograd conv is timed as it ran.
        self.assertEqual(conv_bound.gemm_work(convs), {(8 * 14 * 14, 32 * 9, 64): 2})

    def test_calls_that_differ_are_refused(self):
        with self.assertRaises(SystemExit):
            conv_bound.parse_convs("\n".join([self.WINO] * (conv_bound.CALLS + 1)))
        with self.assertRaises(SystemExit):
            conv_bound.parse_convs("")

    @unittest.skipUnless(os.environ.get("BENCH_GEMM_SHAPES"), "BENCH_GEMM_SHAPES not set (ctest sets it)")
    def test_gemm_shapes_tool_times_each_line_and_refuses_bad_ones(self):
        tool = os.environ["BENCH_GEMM_SHAPES"]
        run = subprocess.run([tool, "2"], input="3 4 5\n1 1 1\n", capture_output=True, text=True)
        if run.returncode == 2 and "no oneDNN" in run.stderr:
            self.skipTest("built without oneDNN")
        self.assertEqual(run.returncode, 0, run.stderr)
        rows = [ln.split() for ln in run.stdout.splitlines()]
        self.assertEqual([r[:3] for r in rows], [["3", "4", "5"], ["1", "1", "1"]])
        self.assertTrue(all(float(r[3]) >= 0 for r in rows))
        bad = subprocess.run([tool], input="0 4 5\n", capture_output=True, text=True)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("out of range", bad.stderr)


class TransformerBound(unittest.TestCase):
    def test_a_layers_products(self):
        # BERT-base at 2 x 64: four [128, 768] x [768, 768] projections and the feed-forward pair.
        self.assertEqual(transformer_bound.products(2, 64),
                         {(128, 768, 768): 4, (128, 768, 3072): 1, (128, 3072, 768): 1})
        self.assertEqual(sum(2 * m * k * n * c for (m, k, n), c in transformer_bound.products(1, 128).items()),
                         2 * 128 * (4 * 768 * 768 + 2 * 768 * 3072))

    def test_bad_arguments_are_refused_before_anything_runs(self):
        script = os.path.join(HERE, "transformer_bound.py")
        for args, message in [(["--rounds", "0"], "at least 1"), (["--gemm", "/nonexistent/gemm"], "not found"),
                              (["--row", "bert:3:7"], "invalid choice")]:
            run = subprocess.run([sys.executable, script] + args, capture_output=True, text=True)
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertIn(message, run.stderr)


if __name__ == "__main__":
    unittest.main()
