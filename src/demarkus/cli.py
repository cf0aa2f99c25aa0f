"""The `demarkus` command: one subcommand per verb, plus serve, token, world and demo.

A target is a `mark://host[:port]/path` URL (over QUIC) or, with `--root`, a bare path in a
local store (embedded, no network). Errors print one line on stderr and exit non-zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

import click
from click.decorators import FC

from . import access, auth
from .access import hidden_count, hidden_note
from .backend import Backend
from .errors import BadRequestError, DemarkusError
from .logs import configure_logging
from .protocol import Response, normalize_scope, parse_mark_url
from .service import Service

if TYPE_CHECKING:
    from .client import Client
    from .expand.select import Selection
    from .importer.site import Site
    from .worlds.world import World, WorldDocument

T = TypeVar("T")
LOCAL_AUTHORITY = "mark://localhost"
"""The identity of an embedded store, unless told otherwise."""


def _run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def _guard(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn every demarkus error into one line on stderr and exit status 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except DemarkusError as exc:
            _fail(str(exc))
        except OSError as exc:
            _fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))

    return wrapper


@click.group()
@click.version_option(package_name="demarkus")
def main() -> None:
    """demarkus: versioned markdown over the Mark Protocol, for agents and people."""


def _sites(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> tuple[Site, ...]:
    """The --site addresses, each checked, ending in `/`, with the folder it shows."""
    from .importer.site import parse_site

    try:
        return tuple(dict.fromkeys(parse_site(url) for url in value))
    except DemarkusError as exc:
        raise click.BadParameter(str(exc)) from None


def link_options(help_prefix: str = "") -> Callable[[FC], FC]:
    """`--site URL[=FOLDER]` (repeatable), an address the folder is also published at, and
    `--wikilinks`: the ways its notes may name each other that become links to the notes."""

    def helped(text: str) -> str:
        return help_prefix + text if help_prefix else text[0].upper() + text[1:]

    site = click.option(
        "--site", "sites", multiple=True, metavar="URL[=FOLDER]", callback=_sites, help=helped(_SITE_HELP)
    )
    wiki = click.option("--wikilinks", is_flag=True, help=helped(_WIKILINKS_HELP))

    def decorate(func: FC) -> FC:
        return site(wiki(func))

    return decorate


_SITE_HELP = (
    "an address the folder is also published at, e.g. https://github.com/org/repo/blob/main/, "
    "or =FOLDER after it for a folder inside it (repeatable): a link to a note's .md file "
    "there, or to the page a site generator renders from a note (b.html, b/), becomes a link to the note, "
    "as does a path from its root (/guide/b)."
)
_WIKILINKS_HELP = (
    "a wiki link ([[name]], [[name#heading|text]], as Obsidian or Foam write them) that names a note "
    "of the folder becomes a markdown link to it, a #tag in a note's text one of its tags, and the "
    "key:: value lines a page opens with (as Logseq writes them) its frontmatter."
)


# --- targets ----------------------------------------------------------------------------

target_options = [
    click.option(
        "--root", type=click.Path(path_type=Path), help="Use a local store (embedded) instead of a mark:// URL."
    ),
    click.option("--token", envvar="DEMARKUS_AUTH", help="Capability token (or DEMARKUS_AUTH)."),
    click.option("--ca", type=click.Path(exists=True, path_type=Path), help="CA certificate to trust."),
    click.option("--insecure", is_flag=True, help="Do not verify the server certificate (development only)."),
]


def with_target(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(target_options):
        func = option(func)
    return func


@contextlib.asynccontextmanager
async def _open(
    target: str, root: Path | None, token: str | None, ca: Path | None, insecure: bool, writes: bool = False
) -> AsyncIterator[tuple[Backend, str]]:
    """Yield (backend, path) for a URL or a bare path in a local store, its percent-escapes
    decoded as the MCP tools decode them (a listing links `My note.md` as `My%20note.md`);
    only a command that `writes` claims the store (a read works beside the process that
    serves it)."""
    if root is not None:
        if target.startswith("mark://"):
            raise BadRequestError("give a bare path like /docs/a.md with --root, not a mark:// URL")
        if not root.is_dir():
            raise BadRequestError(f"--root {root} is not a directory")
        service = Service.open(root, trusted=True, writable=writes)
        try:
            yield service, unquote(target)
        finally:
            service.close()
        return
    if not target.startswith("mark://"):
        raise BadRequestError(f"{target} is not a mark:// URL; pass --root STORE to use a local store")
    from .client import Client  # QUIC and TLS: imported only by the commands that dial

    url = parse_mark_url(target)
    async with Client(url.authority, token=token, ca=ca, insecure=insecure, dial_host=url.host) as client:
        yield client, unquote(url.path)


def _emit(response: Response, *, show_meta: bool = False) -> None:
    """Print the body of a success; turn a failure status into one error line."""
    if not response.ok:
        response.raise_for_status()
    if show_meta:
        click.echo(f"status: {response.status}")
        for key in sorted(response.metadata):
            click.echo(f"{key}: {response.metadata[key]}")
        click.echo("")
    sys.stdout.write(response.text)
    if response.body and not response.text.endswith("\n"):
        sys.stdout.write("\n")


def _verb(
    call: Callable[[Backend, str], Awaitable[Response]],
    target: str,
    root: Path | None,
    token: str | None,
    ca: Path | None,
    insecure: bool,
    show_meta: bool,
    writes: bool = False,
) -> None:
    async def go() -> Response:
        async with _open(target, root, token, ca, insecure, writes) as (backend, path):
            return await call(backend, path)

    _emit(_run(go()), show_meta=show_meta)


# --- verbs ------------------------------------------------------------------------------


@main.command()
@click.argument("target")
@with_target
@click.option("--meta", "show_meta", is_flag=True, help="Print the status and metadata before the body.")
@_guard
def fetch(target: str, root: Path | None, token: str | None, ca: Path | None, insecure: bool, show_meta: bool) -> None:
    """Print a document (TARGET may end in /vN for an old version)."""
    _verb(lambda b, p: b.fetch(p, token=token), target, root, token, ca, insecure, show_meta)


def _noting_hidden(
    call: Callable[[Backend, str], Awaitable[Response]], noun: tuple[str, str], where: str, token: str | None
) -> tuple[Callable[[Backend, str], Awaitable[Response]], Callable[[], None]]:
    """``call``, and what to run once its answer is printed: a `hidden:` line on stderr
    when the authority left rows out for lack of a read token (stdout stays the body)."""
    answers: list[tuple[Response, str]] = []

    async def noted(backend: Backend, path: str) -> Response:
        response = await call(backend, path)
        answers.append((response, path))
        return response

    def note() -> None:
        for response, path in answers:
            count = hidden_count(response.metadata)
            if count:
                text = hidden_note(count, noun, f"{where} {normalize_scope(path)}", carried=bool(token))
                click.echo(f"hidden: {text}", err=True)

    return noted, note


@main.command(name="list")
@click.argument("target")
@with_target
@click.option("--meta", "show_meta", is_flag=True)
@_guard
def list_(target: str, root: Path | None, token: str | None, ca: Path | None, insecure: bool, show_meta: bool) -> None:
    """List a directory (and say on stderr how many entries need a read token)."""
    call, note = _noting_hidden(lambda b, p: b.list(p, token=token), ("entry", "entries"), "of", token)
    _verb(call, target, root, token, ca, insecure, show_meta)
    note()


@main.command()
@click.argument("target")
@with_target
@click.option("--meta", "show_meta", is_flag=True)
@_guard
def versions(
    target: str, root: Path | None, token: str | None, ca: Path | None, insecure: bool, show_meta: bool
) -> None:
    """Show a document's version history and whether its hash chain verifies."""
    _verb(lambda b, p: b.versions(p, token=token), target, root, token, ca, insecure, True)


def _read_body(source: str) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read()
    return Path(source).read_bytes()


def _parse_pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.UsageError(f"--meta {pair}: write key=value")
        out[key.strip()] = value
    return out


@main.command()
@click.argument("target")
@click.argument("source", default="-")
@with_target
@click.option("--meta", "pairs", multiple=True, help="Publisher metadata key=value (repeatable).")
@click.option("--expected-version", type=int, help="0 to create only; N to update only version N.")
@_guard
def publish(
    target: str,
    source: str,
    root: Path | None,
    token: str | None,
    ca: Path | None,
    insecure: bool,
    pairs: tuple[str, ...],
    expected_version: int | None,
) -> None:
    """Publish SOURCE (a file, or - for stdin) as a new version of TARGET."""
    body, metadata = _read_body(source), _parse_pairs(pairs)
    _verb(
        lambda b, p: b.publish(p, body, metadata=metadata, expected_version=expected_version, token=token),
        target,
        root,
        token,
        ca,
        insecure,
        True,
        writes=True,
    )


@main.command()
@click.argument("target")
@click.argument("source", default="-")
@with_target
@click.option("--expected-version", type=int, required=True, help="The version you are appending to.")
@_guard
def append(
    target: str,
    source: str,
    root: Path | None,
    token: str | None,
    ca: Path | None,
    insecure: bool,
    expected_version: int,
) -> None:
    """Append SOURCE (a file, or - for stdin) to the end of TARGET."""
    body = _read_body(source)
    _verb(
        lambda b, p: b.append(p, body, expected_version=expected_version, token=token),
        target,
        root,
        token,
        ca,
        insecure,
        True,
        writes=True,
    )


@main.command()
@click.argument("target")
@with_target
@_guard
def archive(target: str, root: Path | None, token: str | None, ca: Path | None, insecure: bool) -> None:
    """Archive TARGET (publish an empty body to restore it)."""
    _verb(lambda b, p: b.archive(p, token=token), target, root, token, ca, insecure, True, writes=True)


@main.command()
@click.argument("target")
@click.argument("query")
@with_target
@click.option("--filter", "filter_", help="key=value clauses, e.g. tag=adr,modified-after=2026-01-01")
@click.option("--limit", type=int, help="Rows to return (default 10, at most 1000).")
@click.option("--match", type=click.Choice(["catalog", "body"]), help="catalog (tags, titles) or body (sections).")
@click.option("--meta", "show_meta", is_flag=True)
@click.option(
    "--budget",
    type=int,
    default=0,
    help="Tokens for the whole result: print the evidence after the table, as mark_lookup does (e.g. 1500).",
)
@click.option("--explain", is_flag=True, help="With --budget: then list why each passage did or did not make it.")
@_guard
def lookup(
    target: str,
    query: str,
    root: Path | None,
    token: str | None,
    ca: Path | None,
    insecure: bool,
    filter_: str | None,
    limit: int | None,
    match: str | None,
    show_meta: bool,
    budget: int,
    explain: bool,
) -> None:
    """Find documents under TARGET (a scope such as mark://host/ or /docs) matching QUERY;
    say on stderr how many documents there need a read token."""
    if not budget and not explain:
        call, note = _noting_hidden(
            lambda b, p: b.lookup(p, query, filter=filter_, limit=limit, match=match, token=token),
            ("document", "documents"),
            "under",
            token,
        )
        _verb(call, target, root, token, ca, insecure, show_meta)
        note()
        return
    if explain and budget <= 0:
        raise click.UsageError("--explain needs --budget N, a token count such as 1500")
    from .expand.ledger import explain as explained
    from .graph import GraphStore
    from .mcp.server import LocalResolver
    from .mcp.tools import ToolFailure, Tools

    async def go() -> tuple[str, Selection | None]:
        """The lookup as mark_lookup prints it with a budget, and its selection."""
        async with _open(target, root, token, ca, insecure) as (backend, path):
            authority = parse_mark_url(target).authority if root is None else LOCAL_AUTHORITY
            tools = Tools(LocalResolver(backend, authority, GraphStore(None), token=token))
            return await tools.lookup_selection(query, path, filter_, limit, match, budget)

    try:
        text, selection = _run(go())
    except ToolFailure as exc:
        _fail(str(exc))
        return
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if explain and selection is not None:
        sys.stdout.write("\n" + explained(selection.decisions, budget))


# --- serve ------------------------------------------------------------------------------


async def _serve(
    service: Service, host: str, port: int, cert: Path | None, key: Path | None, banner: Callable[[str], None]
) -> None:
    from .server.quic import MarkServer
    from .tls import default_tls_dir, ensure_dev_certificate

    if cert is None or key is None:
        cert, key = ensure_dev_certificate(default_tls_dir())
    server = MarkServer(service, host, port, cert, key)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    banner(server.url)
    try:
        await stop.wait()
    finally:
        await server.close()


def _print_listening(url: str, root: Path) -> None:
    click.echo(f"listening on {url} (root {root})", nl=True)
    sys.stdout.flush()


@main.command()
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Store directory (with --docs, default: a store under your data directory).",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=6309, show_default=True, type=int, help="UDP port; 0 picks a free one.")
@click.option(
    "--tokens",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Token store (TOML); without it writes are refused.",
)
@click.option(
    "--cert",
    type=click.Path(exists=True, path_type=Path),
    help="TLS certificate (PEM); default: a development certificate.",
)
@click.option("--key", type=click.Path(exists=True, path_type=Path), help="TLS private key (PEM).")
@click.option("--log-json", is_flag=True, help="Write one JSON line per request to stderr.")
@click.option("--create", is_flag=True, help="Create the store directory if it does not exist.")
@click.option(
    "--docs",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A markdown folder: imported into the store, then every saved change, while the "
    "server runs; the folder is only read.",
)
@click.option("--prefix", default="/", show_default=True, help="With --docs: the document folder it goes under.")
@click.option("--git", "use_git", is_flag=True, help="With --docs: each commit that changed a file is a version.")
@link_options("With --docs: ")
@_guard
def serve(
    root: Path | None,
    host: str,
    port: int,
    tokens: Path | None,
    cert: Path | None,
    key: Path | None,
    log_json: bool,
    create: bool,
    docs: Path | None,
    prefix: str,
    use_git: bool,
    sites: tuple[Site, ...],
    wikilinks: bool,
) -> None:
    """Serve a store as a Mark authority over QUIC (with --docs, a markdown folder kept in
    sync)."""
    configure_logging("demarkus.access" if log_json else None)
    if root is None:
        if docs is None:
            raise click.UsageError("give --root STORE (or --docs FOLDER)")
        from .importer.command import docs_store

        root = docs_store(docs)
        create = True
    if create:
        root.mkdir(parents=True, exist_ok=True)
    service = Service.open(root, tokens=tokens)
    store = root

    def banner(url: str) -> None:
        _print_listening(url, store)

    if docs is None:
        _run(_serve(service, host, port, cert, key, banner))
        return
    from .importer.command import docs_sync, following
    from .protocol import canonical_path

    def report(line: str) -> None:
        click.echo(f"docs: {line}", err=True)

    async def go() -> None:
        owner = service.as_owner()
        sync = docs_sync(
            docs,
            owner,
            LOCAL_AUTHORITY,
            report,
            prefix=canonical_path(prefix),
            use_git=use_git,
            sites=sites,
            wikilinks=wikilinks,
        )
        await following(sync, _serve(service, host, port, cert, key, banner), report)

    _run(go())


# --- token ------------------------------------------------------------------------------


@main.group()
def token() -> None:
    """Manage capability tokens."""


@token.command()
@click.option(
    "--tokens",
    "tokens_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Token store to add the hash to (created if missing).",
)
@click.option("--label", required=True, help="A name for this grant, e.g. the person or machine.")
@click.option("--paths", required=True, help="Comma-separated path globs, e.g. /docs/**,/notes/*")
@click.option("--ops", default="read,publish", show_default=True, help="read and/or publish")
@click.option("--expires", help="RFC 3339 expiry, e.g. 2026-12-31T23:59:59Z")
@_guard
def generate(tokens_file: Path, label: str, paths: str, ops: str, expires: str | None) -> None:
    """Create a token, store only its hash, and print the token once."""
    when = None
    if expires:
        try:
            when = datetime.fromisoformat(expires.replace("Z", "+00:00"))
        except ValueError:
            raise click.UsageError(f"--expires {expires} is not RFC 3339") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
    raw = auth.generate_token()
    grant = auth.add_grant(
        tokens_file,
        label,
        raw,
        [p.strip() for p in paths.split(",") if p.strip()],
        [o.strip() for o in ops.split(",") if o.strip()],
        when,
    )
    click.echo(raw)
    click.echo(f"stored the hash of this token as [{label}] in {tokens_file}; the token is not shown again", err=True)
    closed = access.newly_private(grant, auth.TokenStore.load(tokens_file))
    if closed:
        click.echo(access.private_warning(closed), err=True)


_tokens_option = click.option(
    "--tokens",
    "tokens_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Token store (TOML).",
)


@token.command(name="list")
@_tokens_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of a table.")
@_guard
def token_list(tokens_file: Path, as_json: bool) -> None:
    """Show every grant: label, paths, operations, expiry and whether it has expired
    (never a token or its hash), by label."""
    views = access.view_grants(auth.TokenStore.load(tokens_file), datetime.now(UTC))
    if as_json:
        sys.stdout.write(access.grants_json(views))
    elif views:
        sys.stdout.write(access.render_grants(views))
    else:
        click.echo(f"{tokens_file} holds no tokens; add one with demarkus token generate", err=True)


@token.command(name="revoke")
@click.argument("label")
@_tokens_option
@_guard
def token_revoke(label: str, tokens_file: Path) -> None:
    """Remove the grant LABEL from the token store; a server reading it stops accepting
    the token as soon as it sees the change."""
    revoked = auth.revoke_grant(tokens_file, label)
    click.echo(f"revoked [{label}] in {tokens_file}; its token no longer works", err=True)
    if revoked.rewritten:
        click.echo(f"note: {tokens_file} was written anew, so its comments and layout are gone", err=True)
    opened = access.newly_public(revoked.grant, revoked.remaining)
    if opened:
        click.echo(access.public_warning(opened), err=True)


# --- world ------------------------------------------------------------------------------


async def _load_world_here(frozen: World, root: Path, token: str | None) -> str:
    """`world load --root`: publish every version while worker processes parse each
    document's last one, then seed the graph (where `demarkus mcp --root` looks for it)
    and the section index from those parses."""
    from .graph import GraphStore
    from .graph.seed import Ahead, seed_graph
    from .graph.store import default_graph_path

    root.mkdir(parents=True, exist_ok=True)
    service = Service.open(root, trusted=True)
    authority = frozen.authority
    graph_path = default_graph_path(root, authority)
    graph_path.parent.mkdir(parents=True, exist_ok=True)
    with Ahead(authority) as ahead, service.deferred_index(), GraphStore(graph_path) as graph:

        def hand_over(doc: WorldDocument) -> None:
            ahead.submit(doc.path, doc.metadata, doc.versions[-1].encode("utf-8"))

        with service.store.filling():  # an empty store is made durable once, at the end
            message = await _load_world_into(frozen, service, token, read=hand_over)
        count = seed_graph(graph, service.store, authority, index=service.index, prepared=ahead.get)
    if service.index is not None:
        service.index.optimize()  # a bulk load: one merge makes every later search faster
    return (
        f"{message}; graph of {count} documents as {authority} (use demarkus mcp --root {root} --authority {authority})"
    )


@main.group()
def world() -> None:
    """Frozen worlds: fixed corpora for evaluation."""


async def _load_world_into(
    frozen: World, backend: Backend, token: str | None, read: Callable[[WorldDocument], None] | None = None
) -> str:
    """Publish every version of the opened world `frozen` through `backend`, with a
    progress bar; the summary line."""
    from rich.console import Console
    from rich.progress import Progress

    from .worlds.loader import load_world

    with Progress(transient=not sys.stderr.isatty(), console=Console(stderr=True)) as bar:
        task = bar.add_task(f"loading {frozen.id}", total=frozen.documents_count)
        report = await load_world(frozen, backend, token=token, progress=lambda n: bar.advance(task, n), read=read)
    return f"loaded {frozen.id}: {report.documents} documents, {report.versions} versions" + (
        f", {report.skipped} already present" if report.skipped else ""
    )


@world.command(name="load")
@click.argument("world_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), help="Store to load into (embedded).")
@click.option("--url", help="Or a mark:// authority to publish to (needs --token).")
@click.option("--token", envvar="DEMARKUS_AUTH")
@click.option("--ca", type=click.Path(exists=True, path_type=Path))
@click.option("--insecure", is_flag=True)
@_guard
def world_load(
    world_dir: Path, root: Path | None, url: str | None, token: str | None, ca: Path | None, insecure: bool
) -> None:
    """Load WORLD_DIR (demarkus-world-v1) into a store, every version in order."""
    if (root is None) == (url is None):
        raise click.UsageError("give exactly one of --root STORE or --url mark://host")

    async def go() -> str:
        from .worlds import open_world

        frozen = open_world(world_dir)  # checks the fingerprints: hashes the whole corpus
        if root is not None:
            return await _load_world_here(frozen, root, token)
        from .client import Client

        assert url is not None
        async with Client(url, token=token, ca=ca, insecure=insecure) as client:
            return await _load_world_into(frozen, client, token)

    click.echo(_run(go()), err=True)


# --- import -----------------------------------------------------------------------------


folder_target_options = [
    click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path)),
    click.argument("target", required=False),
    click.option(
        "--root", type=click.Path(file_okay=False, path_type=Path), help="A local store (created if missing)."
    ),
    click.option("--prefix", help="Document folder the files go under, e.g. /notes (default /)."),
    click.option("--git", "use_git", is_flag=True, help="Each commit that changed a file becomes a version."),
    click.option(
        "--authority",
        default=LOCAL_AUTHORITY,
        show_default=True,
        help="Identity of a local store for its relation graph (as demarkus mcp --authority).",
    ),
    click.option("--token", envvar="DEMARKUS_AUTH", help="Publish token for a mark:// target (or DEMARKUS_AUTH)."),
    click.option("--ca", type=click.Path(exists=True, path_type=Path)),
    click.option("--insecure", is_flag=True),
    link_options(),
]
"""The folder and where it goes, shared by `import` and `sync`."""


def with_folder_target(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(folder_target_options):
        func = option(func)
    return func


def _check_folder_target(root: Path | None, target: str | None) -> None:
    if (root is None) == (target is None):
        raise click.UsageError("give exactly one of --root STORE or a mark://host[:port]/ target")
    if target is not None and not target.startswith("mark://"):
        raise click.UsageError(f"{target} is not a mark:// URL; pass --root STORE to use a local store")


def _import_prefix(target: str | None, prefix: str | None) -> str:
    """The document folder: --prefix, or the path of a mark:// target."""
    from .protocol import canonical_path

    where = parse_mark_url(target).path if target else "/"
    if prefix is not None and where not in ("", "/") and canonical_path(prefix) != canonical_path(where):
        raise click.UsageError(f"the target names {where} and --prefix names {prefix}; give the folder once")
    return canonical_path(prefix or where or "/")


@main.command(name="import")
@with_folder_target
@click.option("--archive-missing", is_flag=True, help="Archive documents under the prefix whose file is gone.")
@_guard
def import_command(
    folder: Path,
    target: str | None,
    root: Path | None,
    prefix: str | None,
    use_git: bool,
    archive_missing: bool,
    authority: str,
    token: str | None,
    ca: Path | None,
    insecure: bool,
    sites: tuple[Site, ...],
    wikilinks: bool,
) -> None:
    """Import every markdown file under FOLDER (*.md; *.mdx and *.markdown as the .md of
    the same name; in a git work tree, not what git ignores) into a store (--root STORE)
    or an authority (TARGET mark://host[:port]/ with --token); the folder is only read.
    Prints a summary; exits 1 when a file was refused or something of one left out."""
    from .importer.command import run_import

    _check_folder_target(root, target)
    summary = run_import(
        folder,
        root=root,
        url=target,
        prefix=_import_prefix(target, prefix),
        use_git=use_git,
        archive_missing=archive_missing,
        authority=parse_mark_url(authority).authority,
        token=token,
        ca=ca,
        insecure=insecure,
        sites=sites,
        wikilinks=wikilinks,
    )
    for line in summary.lines():
        click.echo(line)
    if not summary.ok:
        sys.exit(1)


@main.command()
@with_folder_target
@click.option("--watch", is_flag=True, help="Go on: publish every saved change until Ctrl-C.")
@_guard
def sync(
    folder: Path,
    target: str | None,
    root: Path | None,
    prefix: str | None,
    use_git: bool,
    watch: bool,
    authority: str,
    token: str | None,
    ca: Path | None,
    insecure: bool,
    sites: tuple[Site, ...],
    wikilinks: bool,
) -> None:
    """Keep a store (--root STORE) or an authority (TARGET mark://host[:port]/ with --token)
    in step with FOLDER: import what changed and archive the documents whose file is gone;
    with --watch, go on publishing each saved change as a new version. The folder is only
    read. Exits 1 when a file was refused by the catch-up."""
    from .importer.command import run_sync

    _check_folder_target(root, target)

    def report(line: str) -> None:
        click.echo(line)
        sys.stdout.flush()

    summary = run_sync(
        folder,
        root=root,
        url=target,
        prefix=_import_prefix(target, prefix),
        use_git=use_git,
        watch=watch,
        authority=parse_mark_url(authority).authority,
        report=report,
        token=token,
        ca=ca,
        insecure=insecure,
        sites=sites,
        wikilinks=wikilinks,
    )
    if not watch:
        for line in summary.lines():
            report(line)
    if not summary.ok:
        sys.exit(1)


# --- demo (the main job) ----------------------------------------------------------------


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=6309, show_default=True, type=int, help="UDP port; 0 picks a free one.")
@click.option(
    "--dir",
    "workdir",
    default=".demarkus-demo",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the demo store lives.",
)
@click.option("--log-json", is_flag=True)
@_guard
def demo(host: str, port: int, workdir: Path, log_json: bool) -> None:
    """Serve the bundled demo world on 127.0.0.1 and print how to reach it."""
    from .worlds import demo_world_path, open_world

    configure_logging("demarkus.access" if log_json else None)
    root = workdir / "store"
    root.mkdir(parents=True, exist_ok=True)
    frozen = open_world(demo_world_path())
    service = Service.open(root, trusted=True)
    with service.deferred_index():
        message = _run(_load_world_into(frozen, service, None))
    click.echo(message, err=True)
    read_only = Service(service.store, index=service.index)  # untrusted: public reads, no writes

    def banner(url: str) -> None:
        click.echo(f"demo world {frozen.id}: {frozen.documents_count} documents")
        click.echo(f"listening on {url} (root {root})")
        click.echo("try, in another terminal:")
        click.echo(f"  .venv/bin/demarkus fetch {url}/index.md")
        click.echo(f"  .venv/bin/demarkus lookup {url}/ retention")
        click.echo(f"  .venv/bin/demarkus versions {url}/index.md")
        click.echo("press Ctrl-C to stop")
        sys.stdout.flush()

    _run(_serve(read_only, host, port, None, None, banner))


# --- mcp --------------------------------------------------------------------------------


@main.command(name="mcp")
@click.option("--host", "host_url", help="A remote authority, e.g. mark://localhost:6309 (over QUIC).")
@click.option(
    "--root", type=click.Path(file_okay=False, path_type=Path), help="Or a local store (embedded, no network)."
)
@click.option(
    "--authority",
    default=LOCAL_AUTHORITY,
    show_default=True,
    help="Identity of an embedded store, for relation targets.",
)
@click.option("--scope", default="/", show_default=True, help="Confine every tool to this subtree.")
@click.option("--read-only", is_flag=True, help="Offer only the read tools.")
@click.option(
    "--docs",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A markdown folder to serve: imported into --root (default: a store under your data "
    "directory), then every saved change, while the server runs; the folder is only read.",
)
@click.option("--prefix", default="/", show_default=True, help="With --docs: the document folder it goes under.")
@click.option("--git", "use_git", is_flag=True, help="With --docs: each commit that changed a file is a version.")
@link_options("With --docs: ")
@click.option("--token", envvar="DEMARKUS_AUTH")
@click.option("--ca", type=click.Path(exists=True, path_type=Path))
@click.option("--insecure", is_flag=True)
@_guard
def mcp_command(
    host_url: str | None,
    root: Path | None,
    authority: str,
    scope: str,
    read_only: bool,
    docs: Path | None,
    prefix: str,
    use_git: bool,
    sites: tuple[Site, ...],
    wikilinks: bool,
    token: str | None,
    ca: Path | None,
    insecure: bool,
) -> None:
    """Serve the MCP tools over stdio, for an agent: of a remote authority (--host), a
    local store (--root) or your own markdown folder (--docs, kept in sync; the tools
    then only read: edit the files)."""
    from .graph import GraphStore
    from .graph.store import default_graph_path
    from .importer.command import docs_store, docs_sync, following
    from .mcp.server import LocalResolver, build_server
    from .mcp.tools import Tools
    from .protocol import canonical_path

    if docs is not None and host_url is not None:
        raise click.UsageError("--docs serves a local store; to keep an authority in step use demarkus sync")
    if docs is not None and root is None:
        root = docs_store(docs)
        root.mkdir(parents=True, exist_ok=True)
    if (root is None) == (host_url is None):
        raise click.UsageError("give exactly one of --host mark://host[:port], --root STORE or --docs FOLDER")
    configure_logging()
    writable = not read_only and docs is None

    def report(line: str) -> None:
        click.echo(f"docs: {line}", err=True)

    async def go() -> None:
        backend: Backend
        client: Client | None = None
        service: Service | None = None
        if root is not None:
            if not root.is_dir():
                raise BadRequestError(f"--root {root} is not a directory")
            if docs is not None:
                service = Service.open(root, trusted=True, dates_versions=True)
            else:
                service = Service.open(root, trusted=not read_only, writable=not read_only)
            backend = service
            identity = parse_mark_url(authority).authority
        else:
            assert host_url is not None
            from .client import Client

            url = parse_mark_url(host_url)
            client = Client(url.authority, token=token, ca=ca, insecure=insecure)
            backend, identity = client, url.authority
        graph_path = default_graph_path(root, identity, token if root is None else None)
        graph_path.parent.mkdir(parents=True, exist_ok=True)
        graph = GraphStore(graph_path)
        tools = Tools(LocalResolver(backend, identity, graph, token=token, scope=scope))
        server = build_server(
            lambda: tools,
            writable=writable,
            instructions=f"Connected to {identity}. Use bare paths like /index.md.",
        )
        try:
            if docs is not None and service is not None:
                sync = docs_sync(
                    docs,
                    service,
                    identity,
                    report,
                    graph=graph,
                    prefix=canonical_path(prefix),
                    use_git=use_git,
                    sites=sites,
                    wikilinks=wikilinks,
                )
                await following(sync, server.run_stdio_async(), report)
            else:
                await server.run_stdio_async()
        finally:
            graph.close()
            if client is not None:
                await client.close()

    _run(go())


# --- index ------------------------------------------------------------------------------


@main.group(name="index")
def index_group() -> None:
    """The section index behind LOOKUP match=body."""


@index_group.command(name="rebuild")
@click.option(
    "--root", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path), help="Store directory."
)
@_guard
def index_rebuild(root: Path) -> None:
    """Recreate the section index of an existing store from its current documents (the
    index is derived data: a damaged one is replaced, nothing is lost)."""
    from .index import SectionIndex, rebuild
    from .service import INDEX_FILE
    from .store import FileStore
    from .store.owner import claim

    with claim(root):  # no server may write the store meanwhile
        store = FileStore(root)
        index = SectionIndex.recreate(root / INDEX_FILE)
        try:
            with index.bulk():
                sections = rebuild(index, store)
        finally:
            index.close()
    click.echo(f"indexed {sections} sections of {len(store.documents())} documents", err=True)


from .eval.cli import eval_group  # noqa: E402  (the group imports this module's siblings)

main.add_command(eval_group)

from .gateway.cli import gateway as _gateway  # noqa: E402

main.add_command(_gateway)
