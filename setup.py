"""acp_green: a gevent runtime for Agent Client Protocol agents over stdio."""

from pathlib import Path

from setuptools import find_packages, setup

# psycopg 3, for a store on PostgreSQL: an optional extra (`pip install acp-green[postgres]`). The binary
# wheel bundles libpq, so no system library is needed.
POSTGRES_REQUIRES = ["psycopg[binary]>=3.2,<4"]

TEST_REQUIRES = [
    "pytest>=8",
    "pytest-xdist>=3.5",
    "jsonschema>=4.20",
    # The `http` extra (httpx, websockets): its Streamable HTTP and WebSocket clients drive
    # `acp-green serve --listen` in tests/e2e/test_remote_interop.py.
    "agent-client-protocol[http]==0.12.1",
    "mcp==2.3.0",
    "hypothesis>=6.100",
    # tests/package/test_typecheck.py expects no mypy error in the package: pinned, because each mypy
    # release finds new kinds of error, so an unpinned one could fail the suite with no code change.
    "mypy==2.4.1",
    # gevent ships no types: typeshed's stubs (they bring types-greenlet) let `import gevent` in an
    # agent pass `mypy --strict` (tests/package/test_agent_typecheck.py). Pinned for the reason mypy
    # is; the package itself is checked with gevent as Any (pyproject.toml says why).
    "types-gevent==26.9.0.20261107",
    # A third-party asyncio ACP client, driven against `acp-green serve` in the interop tests.
    "acp-client>=0.1.0",
    # The official OpenAI client, sync and blocking, served patched (tests/e2e/test_openai_sdk_agent.py).
    "openai==3.51.0",
    # The cancel recipe is tested once per HTTP library an agent reaches a model with: urllib,
    # requests, httpx (openai's) and openai (tests/cli/test_cancel_interrupts.py).
    "requests>=2.32",
    # The fresh-install test builds its offline wheelhouse from this environment, so the build
    # backend pyproject.toml names must be installed here (70.1 is the first that needs no `wheel`).
    "setuptools>=70.1",
    # The `postgres` extra below: the PostgreSQL tests run against a real server
    # (scripts/setup-postgres.sh starts one; tests/postgres_server.py hands each test a database).
    *POSTGRES_REQUIRES,
]

setup(
    name="acp-green",
    version="0.1.0",
    description="A gevent runtime for Agent Client Protocol (ACP) agents over stdio",
    long_description=(Path(__file__).parent / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.11",
    packages=find_packages(include=["acp_green", "acp_green.*"]),
    # The root spelt out ("" -> the checkout) changes nothing in a wheel, but it makes setuptools'
    # editable install (`pip install -e .`, scripts/venv.sh) a plain .pth file naming the checkout
    # instead of an import hook (its `__editable__` finder, which it uses for a flat layout with no
    # package_dir): type checkers read .pth paths and cannot run hooks, so `mypy --strict` on an
    # agent outside the checkout finds acp_green (and its py.typed) only this way. What else sits at
    # the checkout's top level (`tests`) is importable in that environment too, as with the
    # `setup.py develop` of old. tests/package/test_agent_typecheck.py checks the install.
    package_dir={"": "."},
    # The bench's peer agents run as their own processes, so `acp-green bench` works installed.
    package_data={"acp_green": ["py.typed", "schema/*.json", "schema/README.md", "schema/v1-older/*.json", "schema/v2/*.json", "schema/v2/SOURCE.md", "tools/bench/peer_agents/*.py", "tools/bench/peer_agents/*.mjs", "tools/bench/peer_agents/*.json", "tools/trace/html_assets/*", "tools/publish/agent.schema.json", "tools/publish/README.md", "tools/newproject/templates/*/*.tmpl"]},
    install_requires=[
        "gevent>=24.10.1",
        "ujson>=5.8",
        "click>=8.1",
        # MCP servers over streamable HTTP: cooperative sockets without monkey-patching; imported lazily.
        # Event streams are read from its response's parser buffer (mcp/httplink.py): capped at 2.x.
        "geventhttpclient>=2.6,<3",
        # `serve --listen`: HTTP/1.1 and WebSocket framing (sans-I/O, on gevent's sockets); imported lazily.
        "h11>=0.16",
        "wsproto>=1.2",
        # The rig (probe, chat, soak) validates what an agent writes against the ACP JSON Schemas:
        # `pip install .` must be enough to run them.
        "jsonschema>=4.20",
    ],
    extras_require={
        # Kept for installs that name it; jsonschema is now a requirement of the package itself.
        "rig": ["jsonschema>=4.20"],
        # matplotlib, for the soak's memory plot and `acp-green bench --chart` (scripts/soak.sh
        # and scripts/bench.sh install it).
        "plot": ["matplotlib>=3.8"],
        # `acp-green bench` W8: an MCP server on the official SDK and its client, measured beside acp_green.
        "bench": ["mcp==2.3.0"],
        "postgres": POSTGRES_REQUIRES,
        "test": TEST_REQUIRES,
    },
    entry_points={
        "console_scripts": ["acp-green = acp_green.__main__:main"],
        # The plugin for agent authors' tests (docs/TESTING.md): the fixtures without a conftest line.
        "pytest11": ["acp_green = acp_green.testing.entry_point"],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Framework :: gevent",
    ],
)
