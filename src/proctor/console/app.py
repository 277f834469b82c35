"""The console's starlette application: server-rendered pages, sign-in, decisions.

Rules every route keeps:

- a GET never changes anything (it reads the run store and renders); a HEAD is answered as
  its GET, without the body, and a route that changes state refuses it (405);
- every POST carries the CSRF token of the signed-in session (sign-in: of the sign-in form's
  cookie), compared in constant time; a POST without it is refused ``csrf_invalid`` with
  nothing recorded;
- a decision names the request digest the person saw; :func:`decide` refuses any other
  (``digest_mismatch``), so a form replayed against a changed or different request changes
  nothing;
- every decision is recorded as ``console:NAME`` (run store, audit log, receipt);
- cookies are HttpOnly and SameSite=Strict (Secure behind https), responses are ``no-store``
  with a CSP that allows no script at all, and a Host header that is not the console's is
  refused (DNS rebinding).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from proctor.console import inert, pages
from proctor.console.sessions import SessionBook, SignedIn
from proctor.console.users import UserBook
from proctor.contracts.values import dataclass, field
from proctor.errors import ProctorError, UsageError

__all__ = ["ConsoleConfig", "build_app", "page_templates"]

SESSION_COOKIE = "proctor_session"
LOGIN_COOKIE = "proctor_login_csrf"
FORM_MAX = 64 * 1024
FORM_TYPE = "application/x-www-form-urlencoded"
CURSOR_MAX = 2**63 - 1
_READS = ("GET", "HEAD")  # starlette routes a GET page's HEAD to it; neither changes anything
HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self';"
    " form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
STATUS = {
    "csrf_invalid": 403,
    "form_too_large": 413,
    "digest_mismatch": 409,
    "already_answered": 409,
    "run_sealed": 409,
    "run_busy": 409,
    "run_not_found": 404,
    "request_not_found": 404,
}


@dataclass
class ConsoleConfig:
    """What one console serves.

    Attributes:
        root: the workspace folder.
        home: the proctor home (users, the signing key).
        environ: the environment runs are driven under (``PROCTOR_*`` settings).
        allowed_hosts: Host header values accepted (without port).
        secure_cookies: mark cookies Secure (served over https).
        sessions: the session book (its lifetime; tests give their own clock).
        pending_page: open requests on one ``/pending`` page (oldest first).
        runs_page: runs on one ``/runs`` page (newest first).
    """

    root: Path
    home: Path
    environ: Mapping[str, str]
    allowed_hosts: list[str] = field(default_factory=lambda: ["127.0.0.1", "localhost", "::1"])
    secure_cookies: bool = False
    sessions: SessionBook = field(default_factory=SessionBook)
    pending_page: int = pages.PENDING_PAGE
    runs_page: int = pages.RUNS_PAGE


Handler = Callable[[Request], Awaitable[Response]]


def page_templates() -> Environment:
    """The console's templates: autoescaped, every ``{{ }}`` through the rendering boundary
    (:func:`proctor.console.inert.finalize`)."""
    templates = Environment(
        loader=PackageLoader("proctor.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=inert.finalize,
    )
    templates.filters["q"] = lambda text: quote(str(text), safe="/")
    templates.filters.update(inert.FILTERS)
    return templates


def build_app(config: ConsoleConfig) -> Starlette:
    """The console application for ``config``'s workspace."""
    templates = page_templates()
    users = UserBook(config.home)
    book = config.sessions

    def session_of() -> Any:
        from proctor.runtime.boundary.workspace import Workspace
        from proctor.runtime.engine.session import Session

        return Session(Workspace.discover(config.root), environ=config.environ)

    def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = templates.get_template(name).render(**context)
        return HTMLResponse(html, status_code=status, headers=HEADERS)

    def refused(person: SignedIn | None, code: str, message: str) -> HTMLResponse:
        status = STATUS.get(code, 400)
        return render("message.html", status, person=person, code=code, message=message)

    def signed_in(request: Request) -> SignedIn | None:
        person = book.get(request.cookies.get(SESSION_COOKIE))
        if person is not None and not users.exists(person.user):
            book.close(person.sid)
            return None
        return person

    def guarded(page: Callable[[Request, SignedIn], Awaitable[Response]]) -> Handler:
        async def handler(request: Request) -> Response:
            person = signed_in(request)
            if person is None:
                # a page (GET, and HEAD: the same answer without its body) sends the person
                # to sign in; a POST is refused, nothing recorded
                if request.method not in _READS:
                    return refused(None, "signed_out", "sign in first; nothing was recorded")
                target = quote(request.url.path, safe="/")
                return RedirectResponse(f"/login?next={target}", 303, headers=HEADERS)
            try:
                return await page(request, person)
            except ProctorError as exc:
                return refused(person, exc.code, exc.message)

        return handler

    async def read(work: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        def job() -> dict[str, Any]:
            session = session_of()
            try:
                return work(session)
            finally:
                session.close()

        return await run_in_threadpool(job)

    async def form_of(request: Request) -> dict[str, str]:
        """The POSTed form, read at most :data:`FORM_MAX` bytes into memory.

        Raises:
            UsageError: ``form_too_large`` (over :data:`FORM_MAX` bytes, declared or sent);
                ``form_invalid`` (see :func:`_parse_form`).
        """
        declared = request.headers.get("content-length") or ""
        if declared.isascii() and declared.isdigit() and int(declared) > FORM_MAX:
            raise _too_large()
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > FORM_MAX:
                raise _too_large()
        return _parse_form(bytes(body), request.headers.get("content-type") or "")

    # -- sign-in ---------------------------------------------------------------------------

    async def login_form(request: Request) -> Response:
        import secrets

        token = secrets.token_urlsafe(32)
        response = render("login.html", csrf=token, next=_safe_next(request.query_params))
        response.set_cookie(
            LOGIN_COOKIE, token, httponly=True, samesite="strict", secure=config.secure_cookies
        )
        return response

    async def login(request: Request) -> Response:
        import hmac

        try:
            form = await form_of(request)
        except ProctorError as exc:
            return refused(None, exc.code, exc.message)
        cookie = request.cookies.get(LOGIN_COOKIE) or ""
        given = form.get("csrf") or ""
        if not cookie or not hmac.compare_digest(cookie.encode(), given.encode()):
            return refused(None, "csrf_invalid", "the sign-in form expired; load it again")
        try:
            user = await run_in_threadpool(users.who, form.get("token") or "")
        except ProctorError as exc:
            return refused(None, exc.code, exc.message)
        if user is None:
            return render("login.html", 401, csrf=given, next=_safe_next(form), failed=True)
        person = book.open(user)
        response = RedirectResponse(_safe_next(form), 303, headers=HEADERS)
        response.set_cookie(
            SESSION_COOKIE,
            person.sid,
            httponly=True,
            samesite="strict",
            secure=config.secure_cookies,
            max_age=int(book.seconds),
        )
        response.delete_cookie(LOGIN_COOKIE)
        return response

    async def logout(request: Request, person: SignedIn) -> Response:
        form = await form_of(request)
        if not person.csrf_ok(form.get("csrf")):
            return refused(person, "csrf_invalid", "the form carried no valid token")
        book.close(person.sid)
        response = RedirectResponse("/login", 303, headers=HEADERS)
        response.delete_cookie(SESSION_COOKIE)
        return response

    # -- pages -----------------------------------------------------------------------------

    async def home(request: Request) -> Response:
        return RedirectResponse("/pending", 303, headers=HEADERS)

    async def pending(request: Request, person: SignedIn) -> Response:
        cursor = _cursor(request.query_params.get("after"))
        size = config.pending_page
        context = await read(lambda s: pages.pending_page(s, after=cursor, limit=size))
        return render("pending.html", person=person, **context)

    async def runs(request: Request, person: SignedIn) -> Response:
        cursor = _cursor(request.query_params.get("after"))
        filters = dict(request.query_params)
        size = config.runs_page
        context = await read(lambda s: pages.runs_page(s, filters, after=cursor, limit=size))
        return render("runs.html", person=person, **context)

    async def run(request: Request, person: SignedIn) -> Response:
        run_id = request.path_params["run_id"]
        context = await read(lambda s: pages.run_page(s, run_id))
        return render("run.html", person=person, **context)

    async def request_view(request: Request, person: SignedIn) -> Response:
        run_id, address = request.path_params["run_id"], request.path_params["address"]
        context = await read(lambda s: pages.request_page(s, run_id, address))
        return render("request.html", person=person, **context)

    async def decide(request: Request, person: SignedIn) -> Response:
        from proctor.runtime.engine.approvals import decide as record

        run_id = request.path_params["run_id"]
        form = await form_of(request)
        if not person.csrf_ok(form.get("csrf")):
            return refused(person, "csrf_invalid", "the form carried no valid token; nothing"
                           " was recorded")  # fmt: skip
        address = form.get("address") or ""
        choice = form.get("decision")
        if choice not in ("approve", "decline"):
            return refused(person, "decision_invalid", "decide approve or decline")
        answers = _answers(form)

        def job() -> dict[str, Any]:
            session = session_of()
            try:
                envelope = record(
                    session,
                    run_id,
                    address,
                    request_digest=form.get("request_digest") or "",
                    approve=choice == "approve",
                    decided_by=f"console:{person.user}",
                    reason=form.get("reason") or None,
                    answers=answers or None,
                )
                return envelope.to_json()
            finally:
                session.close()

        await run_in_threadpool(job)
        return RedirectResponse(f"/runs/{quote(run_id)}", 303, headers=HEADERS)

    routes = [
        Route("/", home),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", guarded(logout), methods=["POST"]),
        Route("/pending", guarded(pending), methods=["GET"]),
        Route("/runs", guarded(runs), methods=["GET"]),
        Route("/runs/{run_id}", guarded(run), methods=["GET"]),
        Route("/runs/{run_id}/decide", guarded(decide), methods=["POST"]),
        Route("/runs/{run_id}/requests/{address:path}", guarded(request_view), methods=["GET"]),
        Mount("/static", StaticFiles(packages=[("proctor.console", "static")]), name="static"),
    ]
    middleware = [
        Middleware(_EveryResponseHeaders),  # outermost: the host check's refusals too
        Middleware(TrustedHostMiddleware, allowed_hosts=config.allowed_hosts),
    ]
    return Starlette(routes=routes, middleware=middleware, lifespan=_upkeep_lifespan(session_of))


UPKEEP_SECONDS = 2.0
"""How often a serving console sends due notifications and settles passed deadlines."""


def _upkeep_lifespan(session_of: Callable[[], Any]) -> Any:
    """While the console serves: every :data:`UPKEEP_SECONDS`, settle what is due in the
    workspace (``Session.settle_due``: due notifications sent, passed deadlines decided)."""
    import contextlib
    import threading

    def loop(stop: threading.Event) -> None:
        while not stop.wait(UPKEEP_SECONDS):
            try:
                session = session_of()
                try:
                    session.settle_due()
                finally:
                    session.close()
            except ProctorError:
                continue  # the next round tries again; the outbox keeps what is due

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        stop = threading.Event()
        thread = threading.Thread(target=loop, args=(stop,), name="proctor-upkeep", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()

    return lifespan


class _EveryResponseHeaders:
    """ASGI middleware: every response carries :data:`HEADERS` (no caching, the
    Content-Security-Policy, no framing), also those the console's pages do not build (a 405
    of a route that takes only POST, a 404 of an unknown path, a refused Host); a header a
    response sets itself is kept."""

    _ADDED = tuple((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in HEADERS.items())

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _value in headers}
                headers += [(k, v) for k, v in self._ADDED if k not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)


def _too_large() -> UsageError:
    return UsageError(
        f"a form is at most {FORM_MAX} bytes; nothing was recorded", code="form_too_large"
    )


def _parse_form(body: bytes, content_type: str) -> dict[str, str]:
    """A form body as fields: URL-encoded UTF-8 (what the console's forms send), each field
    once; an empty body is an empty form.

    Raises:
        UsageError: ``form_invalid`` (another content type, bytes or escapes that are not
            UTF-8, or a field given twice: which of two values counts would be a guess).
    """
    if not body:
        return {}
    if content_type.partition(";")[0].strip().lower() != FORM_TYPE:
        raise UsageError(
            f"a form is posted as {FORM_TYPE}; nothing was recorded", code="form_invalid"
        )
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(
            "the form is not URL-encoded UTF-8; nothing was recorded", code="form_invalid"
        ) from exc
    form: dict[str, str] = {}
    for key, value in pairs:
        if key in form:
            raise UsageError(
                f"the form gives the field {key!r} twice; nothing was recorded",
                code="form_invalid",
            )
        form[key] = value
    return form


def _cursor(after: str | None) -> int | None:
    """A page's ``after`` cursor (history, pending): absent, or a whole number of at most 63
    bits.

    Raises:
        UsageError: ``cursor_invalid`` (anything else, such as ``abc``, ``²`` or a number too
            large for the run store).
    """
    if not after:
        return None
    if not (after.isascii() and after.isdigit()) or len(after) > 19 or int(after) > CURSOR_MAX:
        raise UsageError(
            f"after is a cursor from a page's next link (a whole number up to {CURSOR_MAX})",
            code="cursor_invalid",
        )
    return int(after)


def _answers(form: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Question answers from a form: ``option.QID`` (a choice) and ``text.QID`` (free text);
    what they must be is checked by the resume admission, not here."""
    out: dict[str, dict[str, str]] = {}
    for key, value in form.items():
        kind, _, qid = key.partition(".")
        if kind in ("option", "text") and qid and value:
            out.setdefault(qid, {})[kind] = value
    return out


def _safe_next(params: Mapping[str, str]) -> str:
    """Where to go after signing in: a path of this console only (no ``//host`` or scheme)."""
    target = str(params.get("next") or "/pending")
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/pending"
    return target
