# SPDX-License-Identifier: MIT
"""The detection of the original torch_memory_saver from installed package metadata
(torch_memory_saver/_peer_check.py) over fake dist-info and egg-info directories in temporary
folders, and what `import torch_memory_saver` does where one is on sys.path: ImportError
naming both packages and how to keep one, or with CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver a
RuntimeWarning and cumemsaver's drop-in. The detection itself needs neither torch nor
cumemsaver: it is loaded from its file."""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import warnings

import shim_env

_spec = importlib.util.spec_from_file_location(
    "tms_peer_check", os.path.join(shim_env.SHIM, "torch_memory_saver", "_peer_check.py")
)
pc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pc)

ORIGINAL = ("torch_memory_saver", "0.0.10b1")  # the name and version pip records for it


def write_dist(root, name, version, top_level=None, kind="dist-info"):
    """A distribution's metadata directory as pip (dist-info) or setuptools (egg-info)
    writes it: METADATA / PKG-INFO with Name and Version, and top_level.txt if given."""
    d = os.path.join(root, f"{name.replace('-', '_')}-{version}.{kind}")
    os.makedirs(d)
    meta = "METADATA" if kind == "dist-info" else "PKG-INFO"
    with open(os.path.join(d, meta), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if top_level is not None:
        with open(os.path.join(d, "top_level.txt"), "w") as f:
            f.write("".join(p + "\n" for p in top_level))
    return d


class TmpCase(unittest.TestCase):
    def tmpdir(self):
        d = os.path.realpath(tempfile.mkdtemp(prefix="tms-peer-"))
        self.addCleanup(shutil.rmtree, d, True)
        return d


class TestPeerDistributions(TmpCase):
    def test_original_found_by_its_name(self):
        d = self.tmpdir()
        write_dist(d, *ORIGINAL, top_level=["torch_memory_saver"])
        self.assertEqual(pc.peer_distributions([d]), [pc.Found(*ORIGINAL, d)])

    def test_every_spelling_of_the_name(self):
        for name in ("torch-memory-saver", "Torch.Memory_Saver", "TORCH__MEMORY--SAVER"):
            d = self.tmpdir()
            write_dist(d, name, "1.0")  # no top_level.txt: the name alone
            self.assertEqual(pc.peer_distributions([d]), [pc.Found(name, "1.0", d)], name)

    def test_a_fork_that_provides_the_package(self):
        d = self.tmpdir()
        write_dist(d, "tms-fork", "2.0", top_level=["tms_extras", "torch_memory_saver"])
        write_dist(d, "near-miss", "1.0", top_level=["torch_memory_saver_extras"])
        self.assertEqual(pc.peer_distributions([d]), [pc.Found("tms-fork", "2.0", d)])

    def test_this_package_is_not_the_original(self):
        for name in ("cumemsaver-torch-memory-saver", "cumemsaver_torch.memory_saver"):
            d = self.tmpdir()
            write_dist(d, name, "1.3.0", top_level=["torch_memory_saver"])
            self.assertEqual(pc.peer_distributions([d]), [], name)

    def test_unrelated_distributions_are_not(self):
        d = self.tmpdir()
        write_dist(d, "numpy", "2.0", top_level=["numpy"])
        write_dist(d, "torch", "2.11", top_level=["torch", "functorch"])
        write_dist(d, "cumemsaver", "1.3.0", top_level=["cumemsaver"])
        self.assertEqual(pc.peer_distributions([d]), [])

    def test_unreadable_metadata_is_left_out(self):
        d = self.tmpdir()
        os.makedirs(os.path.join(d, "broken-1.0.dist-info"))  # no METADATA
        with open(os.path.join(d, "binary-1.0.dist-info"), "w"):
            pass  # a file, not a folder
        os.makedirs(os.path.join(d, "latin-1.0.dist-info"))
        with open(os.path.join(d, "latin-1.0.dist-info", "METADATA"), "wb") as f:
            f.write(b"Name: torch_memory_saver\xff\xfe\nVersion: 1\n")
        top = os.path.join(write_dist(d, "weird", "1.0"), "top_level.txt")
        with open(top, "wb") as f:
            f.write(b"torch_memory_saver\xff\n")
        write_dist(d, *ORIGINAL)
        self.assertEqual(pc.peer_distributions([d]), [pc.Found(*ORIGINAL, d)])

    def test_egg_info(self):
        d = self.tmpdir()
        write_dist(d, "torch_memory_saver", "0.0.9", kind="egg-info")
        self.assertEqual(pc.peer_distributions([d]), [pc.Found("torch_memory_saver", "0.0.9", d)])

    def test_path_order_each_location_once(self):
        a, b = self.tmpdir(), self.tmpdir()
        write_dist(a, "torch-memory-saver", "0.0.8")
        write_dist(b, *ORIGINAL)
        self.assertEqual(
            pc.peer_distributions([b, a, b]),
            [pc.Found(*ORIGINAL, b), pc.Found("torch-memory-saver", "0.0.8", a)],
        )


class TestCheck(TmpCase):
    def original(self):
        d = self.tmpdir()
        write_dist(d, *ORIGINAL, top_level=["torch_memory_saver"])
        return d

    def test_refuses_naming_both_and_how_to_keep_one(self):
        d = self.original()
        with self.assertRaises(ImportError) as cm:
            pc.check(path=[d], environ={})
        self.assertEqual(cm.exception.name, "torch_memory_saver")
        text = str(cm.exception)
        for part in (
            f"torch_memory_saver 0.0.10b1 (in {d})",
            "cumemsaver's drop-in",
            "first on sys.path",
            "pip uninstall torch_memory_saver",
            "pip uninstall cumemsaver-torch-memory-saver",
            "CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver",
        ):
            self.assertIn(part, text)

    def test_the_choice_turns_it_into_a_warning(self):
        d = self.original()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = pc.check(path=[d], environ={"CUMEMSAVER_TORCH_MEMORY_SAVER": "cumemsaver"})
        self.assertEqual(found, [pc.Found(*ORIGINAL, d)])
        self.assertEqual([w.category for w in caught], [RuntimeWarning])
        self.assertIn(f"torch_memory_saver 0.0.10b1 (in {d})", str(caught[0].message))

    def test_another_value_still_refuses_and_says_why(self):
        d = self.original()
        with self.assertRaises(ImportError) as cm:
            pc.check(path=[d], environ={"CUMEMSAVER_TORCH_MEMORY_SAVER": "torch_memory_saver"})
        self.assertIn("CUMEMSAVER_TORCH_MEMORY_SAVER='torch_memory_saver' is not 'cumemsaver'",
                      str(cm.exception))

    def test_nothing_to_say_without_the_original(self):
        d = self.tmpdir()
        write_dist(d, "cumemsaver-torch-memory-saver", "1.3.0", top_level=["torch_memory_saver"])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            self.assertEqual(pc.check(path=[d], environ={}), [])


class TestImport(TmpCase):
    """`import torch_memory_saver` in a new process whose sys.path ends with a directory
    holding the original's metadata (where a later site directory would have it)."""

    def run_child(self, body, no_torch=False, **env):
        head = shim_env.CHILD_NO_TORCH if no_torch else shim_env.CHILD
        return subprocess.run(
            [sys.executable, "-c", head + body],
            env=shim_env.child_env(**env),
            capture_output=True,
            text=True,
            timeout=120,
        )

    def test_refused_where_the_original_is_installed(self):
        d = self.tmpdir()
        write_dist(d, *ORIGINAL, top_level=["torch_memory_saver"])
        out = self.run_child(f"sys.path.append({d!r})\nimport torch_memory_saver.utils\n")
        self.assertNotEqual(out.returncode, 0, out.stdout)
        self.assertIn("ImportError: torch_memory_saver: both cumemsaver's drop-in", out.stderr)
        self.assertIn(f"(in {d})", out.stderr)

    def test_served_by_cumemsaver_when_chosen(self):
        d = self.tmpdir()
        write_dist(d, *ORIGINAL)
        out = self.run_child(
            f"sys.path.append({d!r})\nimport torch_memory_saver\n"
            "print(type(torch_memory_saver.torch_memory_saver).__module__)\n",
            CUMEMSAVER_TORCH_MEMORY_SAVER="cumemsaver",
        )
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "cumemsaver.torch_memory_saver")
        self.assertIn("RuntimeWarning: torch_memory_saver: CUMEMSAVER_TORCH_MEMORY_SAVER", out.stderr)

    @unittest.skipIf(shim_env.REAL_TORCH, "PyTorch is installed")
    def test_the_refusal_comes_before_the_need_for_pytorch(self):
        d = self.tmpdir()
        write_dist(d, *ORIGINAL)
        out = self.run_child(f"sys.path.append({d!r})\nimport torch_memory_saver\n", no_torch=True)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("provide this import name", out.stderr)
        self.assertNotIn("needs PyTorch", out.stderr)


if __name__ == "__main__":
    unittest.main()
