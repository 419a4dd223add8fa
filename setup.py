"""Package discovery for the one `ragsieve` namespace over the repository's folders (metadata: pyproject.toml).

`ragsieve` is `ragsieve/` (the public API and the front ends: CLI, service, eval, insights), `ragsieve.agent` is
`agent/`, `ragsieve.tools` is `tools/`, `ragsieve.prompts` is `prompts/` (package-dir in pyproject.toml); every
package below them is found here, so a new sub-package cannot be left out of the wheel.
"""

from setuptools import find_packages, setup

ROOTS = {"ragsieve": "ragsieve", "agent": "ragsieve.agent", "tools": "ragsieve.tools", "prompts": "ragsieve.prompts"}

packages: list[str] = []
for folder, name in ROOTS.items():
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(where=folder)]

setup(packages=packages)
