/* agentwrap dashboard: sessions, their queues and message history, live.
 *
 * Plain JavaScript, no build step, nothing loaded from elsewhere.
 *
 * Safety: message content, source ids, details and evidence come from
 * webhooks and other agents. Every value reaches the page through
 * textContent / createTextNode (never innerHTML), and control characters are
 * shown as visible symbols, so nothing in a message can become markup, run,
 * or hide text from the person reading it.
 *
 * Login: the link `agentwrap serve` prints (or `agentwrap token --link`)
 * carries a one-time code in the URL fragment (#login=CODE), which browsers
 * never send to a server. The page trades it for a bearer token
 * (POST /api/login), keeps that in localStorage and sends it like any client.
 *
 * Updates: one event stream per page, over a WebSocket (/api/ws; the token
 * goes in its first frame, as a browser cannot set a WebSocket's headers),
 * never polling. Not SSE: Chromium keeps six HTTP/1.1 connections per host,
 * and a stream held one in every window, so a fifth window's requests never
 * went. It resumes with the last event id after a drop (lastEventId, as
 * SSE's Last-Event-ID), as the server's event ids allow. Each event
 * re-fetches only what it touched.
 *
 * The screen: the selected session's screen (GET /api/sessions/NAME/screen)
 * as rows of runs, each a text and a style the server checked (palette
 * colours 0..15 become classes, #rrggbb a CSSOM colour, nothing else is
 * taken). Its text goes through the same visible() as every other value,
 * in a <pre> laid out left to right as a terminal does (no bidi reordering).
 * A session.screen event with a new digest fetches it again; coalesced like
 * every fetch, so a busy screen costs at most one request at a time.
 *
 * Starting and stopping: the page lists what the person configured in
 * [[dashboard.launch]] (GET /api/launch) and starts an entry by its name;
 * any session can be stopped, after a confirmation on the page.
 */
'use strict';

(() => {
  const TOKEN_KEY = 'agentwrap.dashboard.token';
  const HISTORY_LIMIT = 50;
  const QUEUE_LIMIT = 200;
  const TOAST_MS = 12000;
  const PRIORITIES = ['startup', 'critical', 'high', 'normal', 'low'];

  const $ = (id) => document.getElementById(id);

  // --- text, made safe and visible ----------------------------------------------------

  /* Characters a person could not see or that would change how the rest
   * reads: C0 (but newline and tab), DEL, C1, bidi controls, zero-width and
   * other invisible format characters. Joiners (U+200C/D) and emoji variation
   * selectors stay: they shape visible glyphs and hide nothing. */
  const INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u061c\u115f\u1160\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u206f\u3164\ufeff\ufff9-\ufffb\uffa0]|[\u{e0000}-\u{e007f}\u{e0100}-\u{e01ef}]/u;
  const INVISIBLE_ALL = new RegExp(INVISIBLE.source, 'gu');

  /* C0 controls by their ASCII names (plain text every font has: the
   * Control Pictures block is missing from many). */
  const C0_NAMES = ['NUL', 'SOH', 'STX', 'ETX', 'EOT', 'ENQ', 'ACK', 'BEL', 'BS', 'HT', 'LF',
    'VT', 'FF', 'CR', 'SO', 'SI', 'DLE', 'DC1', 'DC2', 'DC3', 'DC4', 'NAK', 'SYN', 'ETB', 'CAN',
    'EM', 'SUB', 'ESC', 'FS', 'GS', 'RS', 'US'];

  function symbolFor(ch) {
    const cp = ch.codePointAt(0);
    if (cp < 0x20) return `<${C0_NAMES[cp]}>`;
    if (cp === 0x7f) return '<DEL>';
    return `<U+${cp.toString(16).toUpperCase().padStart(4, '0')}>`;
  }

  /* A fragment showing `text` exactly, each invisible character as a marked symbol. */
  function visible(text) {
    const frag = document.createDocumentFragment();
    const s = text === null || text === undefined ? '' : String(text);
    let last = 0;
    for (const m of s.matchAll(INVISIBLE_ALL)) {
      if (m.index > last) frag.append(document.createTextNode(s.slice(last, m.index)));
      const mark = document.createElement('span');
      mark.className = 'ctl';
      mark.textContent = symbolFor(m[0]);
      mark.title = `control character U+${m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
      frag.append(mark);
      last = m.index + m[0].length;
    }
    if (last < s.length) frag.append(document.createTextNode(s.slice(last)));
    return frag;
  }

  /* el('span', {class: 'x', title: 't'}, child...): children are nodes or text (made visible). */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'class') node.className = value;
      else if (key === 'title') node.title = String(value);
      else if (key.startsWith('data-')) node.setAttribute(key, String(value));
      else if (key === 'hidden') node.hidden = true;
      else node.setAttribute(key, String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : visible(child));
    }
    return node;
  }

  // --- time and numbers -----------------------------------------------------------------

  function clock(epochS) {
    if (!epochS) return '–';
    const d = new Date(epochS * 1000);
    const today = new Date();
    const hms = d.toLocaleTimeString([], {hour: '2-digit', minute: '2-digit', second: '2-digit'});
    return d.toDateString() === today.toDateString() ? hms : `${d.toLocaleDateString()} ${hms}`;
  }

  function span(seconds) {
    if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '–';
    const s = Math.max(0, seconds);
    if (s < 1) return `${Math.round(s * 1000)} ms`;
    if (s < 90) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
    if (s < 5400) return `${Math.round(s / 60)} min`;
    if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
    return `${Math.round(s / 86400)} d`;
  }

  const ago = (epochS) => (epochS ? `${span(Date.now() / 1000 - epochS)} ago` : '–');

  /* A relative time that stays true while the page sits open: kept fresh by
   * a local clock (tickClocks), not by asking the server again. */
  function relative(kind, epochS) {
    const node = el('span', {class: 'rel', 'data-rel': kind, 'data-at': String(epochS)});
    node.textContent = relativeText(kind, epochS);
    return node;
  }

  function relativeText(kind, epochS) {
    const now = Date.now() / 1000;
    if (kind === 'ago') return ago(epochS);
    if (kind === 'age') return `${span(now - epochS)} old`;
    if (kind === 'expires') return epochS > now ? `expires in ${span(epochS - now)}` : 'expiring';
    return '';
  }

  function tickClocks() {
    for (const node of document.querySelectorAll('.rel')) {
      node.textContent = relativeText(node.dataset.rel, Number(node.dataset.at));
    }
  }
  const shortId = (id) => String(id || '').slice(0, 8);
  const stateLabel = (state) => String(state || 'unknown').replace(/_/g, ' ');

  // --- the API ----------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, body) {
      const b = body && typeof body === 'object' ? body : {};
      super(b.error || `HTTP ${status}`);
      this.status = status;
      this.body = {error: b.error || `HTTP ${status}`, detail: b.detail || null, hint: b.hint || null};
    }
  }

  const token = {
    get: () => localStorage.getItem(TOKEN_KEY),
    set: (value) => localStorage.setItem(TOKEN_KEY, value),
    drop: () => localStorage.removeItem(TOKEN_KEY),
  };

  function authHeaders(extra) {
    const headers = Object.assign({Accept: 'application/json'}, extra || {});
    const t = token.get();
    if (t) headers.Authorization = `Bearer ${t}`;
    return headers;
  }

  async function api(method, path, body) {
    const init = {method, headers: authHeaders(), cache: 'no-store', credentials: 'same-origin'};
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, {error: 'Server unreachable', detail: String(e && e.message || e),
        hint: 'is `agentwrap serve` still running?'});
    }
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    if (res.status === 401) {
      loggedOut(data);
      throw new ApiError(401, data);
    }
    if (!res.ok) throw new ApiError(res.status, data);
    return data;
  }

  const enc = encodeURIComponent;

  // --- login ---------------------------------------------------------------------------------

  /* #login=CODE in the address: trade it for a token, and take it out of the
   * address bar and the history at once (it works only once anyway). */
  async function loginFromFragment() {
    const m = /^#login=([^&]*)/.exec(location.hash);
    if (!m) return null;
    history.replaceState(null, '', location.pathname + location.search);
    let res;
    try {
      res = await fetch('/api/login', {
        method: 'POST', cache: 'no-store', credentials: 'same-origin',
        headers: {'Content-Type': 'application/json', Accept: 'application/json'},
        body: JSON.stringify({code: decodeURIComponent(m[1])}),
      });
    } catch (e) {
      return {error: 'Server unreachable', detail: String(e && e.message || e)};
    }
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    if (res.ok && data && typeof data.token === 'string') {
      token.set(data.token);
      return null;
    }
    return data || {error: `login failed (HTTP ${res.status})`};
  }

  function showLogin(why) {
    stream.stop();
    $('main').hidden = true;
    $('login').hidden = false;
    setConn('offline', 'not logged in');
    const box = $('login-why');
    box.replaceChildren();
    if (why && why.error) {
      box.append(el('strong', null, why.error));
      if (why.detail) box.append(': ', why.detail);
      if (why.hint) box.append(el('br'), el('span', {class: 'hint'}, why.hint));
      box.hidden = false;
    } else {
      box.hidden = true;
    }
  }

  /* A request refused for want of a token. When the login panel already says why (a
   * login link refused: "used already"), a stray request's later 401 ("missing bearer
   * token") must not replace the reason the person needs. */
  function loggedOut(body) {
    token.drop();
    if (!$('login').hidden && !$('login-why').hidden) {
      stream.stop();
      return;
    }
    showLogin(body);
  }

  // --- the event stream (one WebSocket per page) -----------------------------------------

  function setConn(kind, text) {
    const c = $('conn');
    c.dataset.conn = kind;
    c.textContent = text;
  }

  const stream = (() => {
    const RETRY_MS = 2000; // as SSE's "retry:" said
    const FINAL = new Set([4401]); // a wrong token: log in again, do not retry
    let lastId = null;
    let socket = null;
    let generation = 0; // a stop, or a new start, ends every loop of an older one

    function stop() {
      generation += 1;
      if (socket) socket.close(1000);
      socket = null;
    }

    /* One connection until it closes: the auth frame (with lastEventId, as
     * SSE's Last-Event-ID), then onOpen once the server says it subscribed
     * ("stream.ready": nothing after it is missed), then every event. Resolves
     * with how it closed ({code, reason}). */
    function connect(onEvent, onOpen) {
      return new Promise((resolve) => {
        const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
        let ws;
        try {
          ws = new WebSocket(`${scheme}://${location.host}/api/ws`);
        } catch (e) {
          resolve({code: 0, reason: ''});
          return;
        }
        socket = ws;
        ws.onopen = () => {
          const auth = {type: 'auth', token: token.get() || '', ready: true};
          if (lastId !== null) auth.lastEventId = lastId;
          ws.send(JSON.stringify(auth));
        };
        ws.onmessage = (ev) => {
          let parsed = null;
          try { parsed = JSON.parse(ev.data); } catch (e) { parsed = null; }
          if (!parsed || typeof parsed !== 'object') return;
          if (parsed.type === 'stream.ready') {
            if (lastId === null && typeof parsed.lastEventId === 'string') lastId = parsed.lastEventId;
            onOpen();
            return;
          }
          if (typeof parsed.id === 'string' && !parsed.id.includes('\0')) lastId = parsed.id;
          onEvent(parsed);
        };
        ws.onclose = (ev) => {
          if (socket === ws) socket = null;
          resolve({code: ev.code, reason: ev.reason || ''});
        };
      });
    }

    /* Connects, and after a drop reconnects (after RETRY_MS) resuming from the
     * last event id; a reconnect without one reloads all. */
    async function start(onEvent, onOpen) {
      stop();
      const mine = generation;
      const running = () => generation === mine;
      let first = true;
      while (running()) {
        setConn('connecting', first ? 'connecting…' : 'reconnecting…');
        const resumed = lastId !== null;
        const closed = await connect(onEvent, () => {
          if (!running()) return;
          setConn('live', 'live');
          onOpen(first || !resumed);
          first = false;
        });
        if (!running()) return;
        if (FINAL.has(closed.code)) {
          loggedOut({error: 'Unauthorized', detail: closed.reason,
                     hint: 'open a new login link: `agentwrap token --link`'});
          return;
        }
        setConn('offline', 'disconnected, retrying…');
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    }

    return {start, stop};
  })();

  // --- what the page knows --------------------------------------------------------------

  const model = {
    sessions: [], // SessionSummary, as listed
    host: null, // the host serving the page (SessionList.host): whose a bare name is
    details: new Map(), // address (HOST/NAME) -> SessionDetail
    selected: null, // the address of the session on show
    queue: null, // InputPeek of the selected session
    history: null, // MessageList of the selected session
    screen: null, // ScreenOut of the selected session
    screenWhy: null, // why there is none: the API's words (another host keeps it, none yet)
    launch: null, // LaunchList: what may be started from here
  };
  const openLogs = new Set(); // ids of messages whose attempts the person unfolded

  /* Coalesces re-fetches: a burst of events makes one request per thing it
   * touched, and one more if events arrive while that request runs. A fetch
   * that never reached the server (status 0: the server restarting, or the
   * browser dropping requests on a network change, ERR_NETWORK_CHANGED) is
   * tried again by itself, after 0.5 s doubling to 8 s: no event may come to
   * ask again, and the page would stay empty (the 10-window benchmark's 5th
   * window did). */
  const RETRY_MIN_MS = 500;
  const RETRY_MAX_MS = 8000;
  const refresh = (() => {
    const dirty = new Set();
    const running = new Set();
    const backoff = new Map(); // key -> the next retry's delay
    let scheduled = false;

    function mark(key) {
      dirty.add(key);
      if (!scheduled) {
        scheduled = true;
        queueMicrotask(flush);
      }
    }

    function flush() {
      scheduled = false;
      for (const key of [...dirty]) {
        if (running.has(key)) continue;
        dirty.delete(key);
        running.add(key);
        run(key).then(() => { backoff.delete(key); }, (e) => {
          reportLoadError(e);
          if (!(e instanceof ApiError && e.status === 0)) return;
          const wait = backoff.get(key) || RETRY_MIN_MS;
          backoff.set(key, Math.min(wait * 2, RETRY_MAX_MS));
          setTimeout(() => mark(key), wait);
        }).finally(() => {
          running.delete(key);
          if (dirty.has(key)) mark(key);
        });
      }
    }

    return {mark};
  })();

  async function run(key) {
    const [what, name] = JSON.parse(key);
    if (what === 'list') return loadList();
    if (what === 'session') return loadSession(name);
    if (what === 'queue') return loadQueue(name);
    if (what === 'history') return loadHistory(name);
    if (what === 'screen') return loadScreen(name);
    if (what === 'launch') return loadLaunch();
    return undefined;
  }

  const touch = (what, name) => refresh.mark(JSON.stringify([what, name === undefined ? null : name]));

  function reportLoadError(e) {
    if (e instanceof ApiError && e.status === 401) return;
    toast('error', 'Could not load', e instanceof ApiError ? e.body : {error: String(e)});
  }

  /* A session's address, what the page keys it by (cards, details, the
   * selection, fetches): HOST/NAME (a bare NAME for a session recorded
   * before hosts were), so two hosts' `dev` are two sessions. Its path under
   * /api/sessions is the address percent-encoded as one segment (the server
   * routes HOST%2FNAME). */
  const addressOf = (s) => (s.host ? `${s.host}/${s.name}` : s.name);
  const summaryOf = (id) => model.sessions.find((s) => addressOf(s) === id);
  const sessionPath = (id) => `/api/sessions/${enc(id)}`;

  /* The listed session a name from elsewhere means: an event names it as the
   * store keys it (HOST/NAME on a shared store, the bare name on one machine,
   * issue 23), a link may name it either way; a bare name is this host's
   * session when it has one, as the server takes it (issue 35). Unlisted: the
   * name as given. */
  function idOf(session) {
    if (session === null || session === undefined) return session;
    const given = String(session);
    if (given.includes('/') || summaryOf(given)) return given;
    const named = model.sessions.filter((x) => x.name === given);
    const s = named.find((x) => x.host === model.host) || named[0];
    return s ? addressOf(s) : given;
  }

  /* How the page names a session to a person: its name, or HOST/NAME where
   * another host has a session of that name too. */
  function label(id) {
    const s = summaryOf(id);
    return s && model.sessions.filter((x) => x.name === s.name).length === 1 ? s.name : id;
  }

  async function loadList() {
    // ended ones too: kept until dismissed, listed apart (conversation.js) and shown read-only
    const data = await api('GET', '/api/sessions?all=true');
    model.sessions = data.sessions;
    model.host = data.host;
    const ids = new Set(model.sessions.map(addressOf));
    for (const id of [...model.details.keys()]) if (!ids.has(id)) model.details.delete(id);
    for (const id of ids) if (!model.details.has(id)) touch('session', id);
    if (!model.selected || !ids.has(model.selected)) {
      const wanted = idOf(wantedSession());
      const first = model.sessions.find((s) => s.liveness !== 'ended');
      select(ids.has(wanted) ? wanted : first ? addressOf(first) : null);
    }
    renderList();
  }

  async function loadSession(name) {
    try {
      model.details.set(name, await api('GET', sessionPath(name)));
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        // gone (ended and cleaned up): its session.exited event redraws the list;
        // asking for the list here could ask for this session again, and again
        model.details.delete(name);
        renderList();
        return;
      }
      throw e;
    }
    renderList();
    if (name === model.selected) renderSession();
  }

  async function loadQueue(name) {
    const data = await api('GET', `${sessionPath(name)}/input?limit=${QUEUE_LIMIT}`);
    if (name !== model.selected) return;
    model.queue = data;
    renderQueue();
  }

  async function loadHistory(name) {
    const data = await api('GET', `/api/messages?session=${enc(name)}&limit=${HISTORY_LIMIT}`);
    if (name !== model.selected) return;
    model.history = data;
    renderHistory();
  }

  function loadAll() {
    touch('list');
    touch('launch');
    for (const s of model.sessions) touch('session', addressOf(s));
    if (model.selected) {
      touch('queue', model.selected);
      touch('history', model.selected);
      touch('screen', model.selected);
    }
  }

  // --- events ---------------------------------------------------------------------------

  function onEvent(ev) {
    const name = idOf(ev.session);
    const type = String(ev.type || '');
    if (type === 'session.screen') { // often: only the screen on show is fetched again
      const digest = ev.data && ev.data.digest;
      if (name === model.selected && !(model.screen && model.screen.digest === digest)) touch('screen', name);
      return;
    }
    const known = Boolean(summaryOf(name));
    const endSaid = type === 'session.state' && ev.data && ev.data.state === 'exited';
    if (!known || type === 'session.exited' || type === 'session.ended' || endSaid) touch('list');
    if (window.agentwrapConversation) window.agentwrapConversation.event(ev, name);
    if (type === 'session.state') noteState(name, ev.data);
    if (name) touch('session', name);
    if (name && name === model.selected && (type.startsWith('message.') || type.startsWith('session.input'))) {
      touch('queue', name);
      touch('history', name);
    }
    if (type === 'message.escalated') {
      toast('escalated', `Escalated in ${label(name)}`, {
        error: `message ${shortId(ev.messageId)} could not be delivered`,
        detail: ev.data && ev.data.detail,
      });
    } else if (type === 'session.waiting_input') {
      const q = ev.data && ev.data.question;
      const box = toast('waiting', `${label(name)} is waiting for input`, q ? {
        error: q.title || questionText(q) || 'the agent asks a question',
        detail: q.command ? `${q.tool ? `${q.tool}: ` : ''}${q.command}` : null,
        hint: questionText(q) !== q.title ? questionText(q) : null,
      } : {
        error: ev.data && ev.data.reason || 'the agent asks a question',
        detail: ev.data && ev.data.rule ? `rule: ${ev.data.rule}` : null,
      });
      box.dataset.session = name;
    }
  }

  /* A session.state event says at once what the agent does now (and what it
   * asks): the question card follows it without waiting for the re-fetch. */
  function noteState(name, data) {
    const d = model.details.get(name);
    if (!d || !data || !data.state) return;
    const waiting = data.state === 'waiting_input';
    d.state = data.state;
    d.explanation = Object.assign({}, d.explanation, {
      state: data.state, reason: data.reason, signal: data.signal, rule: data.rule,
      question: waiting ? data.question || null : null,
    });
    if (!waiting) {
      for (const t of document.querySelectorAll('#toasts .toast-waiting')) {
        if (t.dataset.session === name) t.remove(); // answered: nothing to act on any more
      }
    }
    renderList();
    if (name === model.selected) renderSession();
  }

  // --- choosing a session -----------------------------------------------------------------

  function wantedSession() {
    const m = /^#session=(.+)$/.exec(location.hash);
    if (!m) return null;
    try { return decodeURIComponent(m[1]); } catch (e) { return null; }
  }

  function select(name) {
    if (name === model.selected) return;
    model.selected = name;
    model.queue = null;
    model.history = null;
    model.screen = null;
    model.screenWhy = null;
    if (name) {
      if (wantedSession() !== name) history.replaceState(null, '', `#session=${enc(name)}`);
      touch('session', name);
      touch('queue', name);
      touch('history', name);
      touch('screen', name);
    }
    $('send-result').hidden = true;
    $('answer-result').hidden = true;
    $('stop-result').hidden = true;
    $('stop-confirm').hidden = true;
    renderList();
    renderSession();
    renderQueue();
    renderHistory();
    renderScreen();
    if (window.agentwrapTerminal) window.agentwrapTerminal.show(name); // terminal.js: the live one
    if (window.agentwrapConversation) window.agentwrapConversation.show(name); // conversation.js
  }

  // --- rendering ------------------------------------------------------------------------------

  function priorityBadges(detail, summary) {
    const box = el('span', {class: 'badges'});
    const counts = detail ? detail.pendingByPriority || {} : {};
    let shown = 0;
    for (const p of PRIORITIES) {
      const n = counts[p] || 0;
      if (!n) continue;
      shown += n;
      box.append(el('span', {class: `badge prio-${p}`, title: `${n} pending, ${p} priority`,
        'data-priority': p}, String(n)));
    }
    const total = detail ? detail.pending : summary ? summary.pending : 0;
    if (total > shown) box.append(el('span', {class: 'badge prio-other', title: `${total - shown} pending`}, String(total - shown)));
    if (detail && detail.queueDepth > total) {
      const n = detail.queueDepth - total;
      box.append(el('span', {class: 'badge inflight', title: `${n} being delivered now`}, `${n} ▸`));
    }
    return box;
  }

  /* Its host's liveness: a host silent past its deadline is unreachable since
   * its last beat (its sessions' state is then unknown); up shows nothing. */
  function hostTag(s) {
    if (s.hostLiveness !== 'unreachable') return null;
    const since = s.unreachableSince ? `unreachable since ${clock(s.unreachableSince)}` : 'unreachable (never seen)';
    return el('span', {class: 'tag host-down', title: 'its host stopped beating: nothing there is known now'}, since);
  }

  function statePill(state) {
    const s = String(state || 'unknown');
    return el('span', {class: `pill state state-${s.replace(/[^a-z_]/g, '')}`}, stateLabel(s));
  }

  function renderList() {
    const list = $('session-list');
    const running = model.sessions.filter((s) => s.liveness !== 'ended');
    if (window.agentwrapConversation) { // conversation.js: the Ended section
      window.agentwrapConversation.ended(model.sessions.filter((s) => s.liveness === 'ended'),
        model.selected, select, () => touch('list'));
    }
    const items = running.map((s) => {
      const id = addressOf(s);
      const d = model.details.get(id);
      const state = d ? d.state : s.state;
      const why = d ? d.explanation.reason : '';
      const button = el('button', {type: 'button', class: 'session-card', 'aria-current': id === model.selected ? 'true' : null},
        el('span', {class: 'card-top'},
          el('span', {class: `dot state-${String(state).replace(/[^a-z_]/g, '')}`, 'aria-hidden': 'true'}),
          el('span', {class: 'session-name mono'}, s.name),
          priorityBadges(d, s)),
        el('span', {class: 'card-host'}, el('span', {class: 'session-host mono muted'}, s.host || ''),
          hostTag(s)),
        el('span', {class: 'card-state'}, stateLabel(state),
          s.liveness !== 'running' && s.liveness !== 'unreachable' ? el('span', {class: 'tag'}, s.liveness) : null,
          el('span', {class: 'muted'}, ` · ${s.profile}`)),
        why ? el('span', {class: 'card-why'}, why) : null);
      button.addEventListener('click', () => select(id));
      return el('li', {'data-address': id, 'data-session': s.name, 'data-host': s.host || '', 'data-state': state}, button);
    });
    list.replaceChildren(...items);
    $('session-count').textContent = running.length ? String(running.length) : '';
    $('no-sessions').hidden = running.length > 0;
  }

  function fact(dl, term, value, cls) {
    if (value === null || value === undefined || value === '') return;
    dl.append(el('div', {class: 'fact'}, el('dt', null, term), el('dd', {class: cls || null}, value)));
  }

  function renderSession() {
    const name = model.selected;
    const d = name ? model.details.get(name) : null;
    $('placeholder').hidden = Boolean(name);
    $('session-view').hidden = !name;
    if (!name) return;
    const summary = summaryOf(name);
    $('sv-name').replaceChildren(visible(summary ? summary.name : d ? d.name : name));
    $('sv-state').replaceWith(Object.assign(statePill(d ? d.state : summary && summary.state), {id: 'sv-state'}));
    const live = d ? d.liveness : summary ? summary.liveness : '';
    $('sv-liveness').replaceChildren(visible(live && live !== 'running' ? live : ''));
    $('sv-liveness').hidden = !live || live === 'running' || live === 'unreachable';
    const host = d || summary;
    const down = host ? hostTag(host) : null;
    $('sv-host').replaceChildren(visible(host && host.host ? `on ${host.host}` : ''), ...(down ? [down] : []));
    $('sv-badges').replaceWith(Object.assign(priorityBadges(d, summary), {id: 'sv-badges'}));
    const ended = live === 'ended' || live === 'unreachable' || Boolean(d && d.ended);
    $('stop-button').hidden = ended;
    if (ended) $('stop-confirm').hidden = true;

    const why = $('sv-why');
    why.replaceChildren();
    if (d) {
      const x = d.explanation;
      why.append(el('p', {class: 'reason'}, pageReason(d) || 'no explanation recorded'));
      const how = el('p', {class: 'how muted'});
      const bits = [];
      if (x.rule) bits.push(['rule', x.rule]);
      if (x.signal) bits.push(['signal', x.signal]);
      bits.push(['since', el('span', null, `${clock(x.since)} (`, relative('ago', x.since), ')')]);
      if (x.draft) bits.push(['draft', 'the person is typing']);
      // OpenCode runs every tool without asking unless started in its ask-first mode
      if (d.permissionGate) bits.push(['permission gate', d.permissionGate]);
      bits.forEach(([k, v], i) => {
        if (i) how.append(' · ');
        how.append(el('span', {class: 'k'}, k), ' ', el('span', {class: 'mono'}, v));
      });
      why.append(how);
      if (x.evidence) why.append(el('pre', {class: 'evidence mono', title: 'what the detector saw'}, x.evidence));
    }
    renderQuestion(name, d);

    const facts = $('sv-facts');
    facts.replaceChildren();
    if (d) {
      const mtr = d.metrics;
      fact(facts, 'profile', d.profile);
      fact(facts, 'backend', d.backend);
      fact(facts, 'started', clock(d.started));
      if (d.ended) fact(facts, 'ended', `${clock(d.ended)} (exit ${d.exitCode ?? '?'})`);
      if (d.ended) fact(facts, 'why it ended', d.endReason);
      fact(facts, 'queue', `${d.pending} pending · ${d.queueDepth - d.pending} in flight`);
      fact(facts, 'delivered', `${mtr.succeededFirstTry} first try · ${mtr.succeededAfterRetry} after retry`);
      if (mtr.escalated) fact(facts, 'escalated', String(mtr.escalated), 'bad');
      if (mtr.failed) fact(facts, 'failed', String(mtr.failed), 'bad');
      if (mtr.meanLatencyS !== null) fact(facts, 'latency', `mean ${span(mtr.meanLatencyS)} · p95 ${span(mtr.p95LatencyS)}`);
    }
  }

  /* The state's reason as the page shows it: a profile says "answer it in the
   * terminal" for the CLI's sake, but where the question card below has the
   * answer buttons, that is where to answer it. */
  function pageReason(d) {
    const x = d.explanation;
    const q = x.question;
    const answerable = d.state === 'waiting_input' && q && q.questions && q.questions.length === 1;
    const reason = String(x.reason || '');
    return answerable ? reason.replace(/\banswer it in the terminal\b/i, 'answer it below') : reason;
  }

  // --- the screen ---------------------------------------------------------------------

  async function loadScreen(name) {
    let data = null;
    let why = null;
    try {
      data = await api('GET', `${sessionPath(name)}/screen`);
    } catch (e) {
      if (!(e instanceof ApiError) || (e.status !== 409 && e.status !== 404)) throw e;
      // nothing recorded yet, the session is gone, or another host keeps it: the
      // server says which (as the CLI does), and the page says what it said
      why = e.body;
    }
    if (name !== model.selected) return;
    model.screen = data;
    model.screenWhy = why;
    renderScreen();
  }

  const PALETTE = (v) => Number.isInteger(v) && v >= 0 && v <= 15;
  const HEX = (v) => typeof v === 'string' && /^#[0-9a-f]{6}$/.test(v);

  /* One run: its text made visible, its style from checked values only. */
  function runNode(run) {
    const node = el('span', null, run.text);
    let fg = run.fg;
    let bg = run.bg;
    if (run.reverse) { // swapped, the terminal's own default colours included
      [fg, bg] = [bg === undefined || bg === null ? 'dbg' : bg, fg === undefined || fg === null ? 'dfg' : fg];
    }
    const cls = [];
    if (PALETTE(fg)) cls.push(`fg${fg}`); else if (HEX(fg)) node.style.color = fg; else if (fg === 'dbg') cls.push('fg-rev');
    if (PALETTE(bg)) cls.push(`bg${bg}`); else if (HEX(bg)) node.style.backgroundColor = bg; else if (bg === 'dfg') cls.push('bg-rev');
    for (const flag of ['bold', 'dim', 'italic', 'underline', 'strike']) if (run[flag] === true) cls.push(`t-${flag}`);
    if (cls.length) node.className = cls.join(' ');
    return node;
  }

  function renderScreen() {
    const box = $('screen');
    const sc = model.screen;
    const lines = sc && Array.isArray(sc.lines) ? sc.lines : [];
    box.replaceChildren(...lines.map((row, i) => {
      const line = el('span', {class: 'term-row'}, ...(Array.isArray(row) ? row : [])
        .filter((r) => r && typeof r.text === 'string').map(runNode));
      return i < lines.length - 1 ? [line, '\n'] : [line];
    }).flat());
    box.hidden = !sc;
    const empty = $('screen-empty');
    empty.hidden = Boolean(sc) || !model.selected;
    const why = model.screenWhy;
    const said = why ? String(why.detail || why.error) : '';
    empty.replaceChildren(why ? visible(`${said.charAt(0).toUpperCase()}${said.slice(1)}.`) : 'No screen recorded yet.',
      ...(why && why.hint ? [el('span', {class: 'muted'}, ' ', visible(why.hint))] : []));
    const meta = $('screen-meta');
    meta.replaceChildren();
    if (sc) {
      meta.append(`${sc.cols}\u00d7${sc.rows}`);
      if (sc.at) meta.append(' \u00b7 saved ', relative('ago', sc.at));
      if (!sc.styled) meta.append(' \u00b7 no colours recorded');
      if (sc.title) meta.append(' \u00b7 title ', el('span', {class: 'screen-title mono'}, sc.title));
    }
  }

  // --- starting and stopping sessions -------------------------------------------------

  async function loadLaunch() {
    model.launch = await api('GET', '/api/launch');
    renderLaunch();
  }

  function launchWhat(c) {
    const agent = c.command || c.profile;
    return `${[agent, ...(c.args || [])].join(' ')}  in ${c.cwd}`;
  }

  function renderLaunch() {
    const choices = model.launch ? model.launch.choices : [];
    const select = $('launch-choice');
    const keep = select.value;
    select.replaceChildren(...choices.map((c) => el('option', {value: c.name}, c.name)));
    if (choices.some((c) => c.name === keep)) select.value = keep;
    $('launch-form').hidden = !choices.length;
    $('launch-none').hidden = !model.launch || choices.length > 0;
    showLaunchWhat();
  }

  function showLaunchWhat() {
    const choices = model.launch ? model.launch.choices : [];
    const c = choices.find((x) => x.name === $('launch-choice').value);
    $('launch-what').replaceChildren(c ? visible(launchWhat(c)) : '');
  }

  function resultParts(e) {
    const b = e instanceof ApiError ? e.body : {error: String(e)};
    return [el('strong', {class: 'error-title'}, b.error),
      e.status ? el('span', {class: 'muted'}, ` (HTTP ${e.status})`) : null,
      b.detail ? el('div', {class: 'error-detail'}, b.detail) : null,
      b.hint ? el('div', {class: 'error-hint'}, b.hint) : null].filter(Boolean);
  }

  function showBox(id, kind, parts) {
    const box = $(id);
    box.className = `send-result ${kind}`;
    box.replaceChildren(...parts);
    box.hidden = false;
  }

  async function onLaunch(ev) {
    ev.preventDefault();
    const launch = $('launch-choice').value;
    if (!launch) return;
    const name = $('launch-name').value.trim();
    const button = $('launch-button');
    button.disabled = true;
    showBox('launch-result', 'pending', [`Starting ${launch}\u2026`]);
    try {
      const rec = await api('POST', '/api/sessions', name ? {launch, name} : {launch});
      showBox('launch-result', 'ok', [el('strong', null, 'Started '), el('span', {class: 'mono'}, rec.name), ` (${rec.profile}).`]);
      $('launch-name').value = '';
      touch('list');
      select(addressOf(rec));
    } catch (e) {
      if (e.status !== 401) showBox('launch-result', 'error', resultParts(e));
    } finally {
      button.disabled = false;
    }
  }

  function askStop() {
    const name = model.selected;
    if (!name) return;
    const confirm = $('stop-confirm');
    confirm.dataset.session = name;
    $('stop-question').replaceChildren('Stop ', el('strong', {class: 'mono'}, label(name)),
      '? Its agent and everything it started are ended (like ', el('code', null, 'agentwrap stop'), ').');
    confirm.hidden = false;
    $('stop-yes').focus();
  }

  async function onStop() {
    const confirm = $('stop-confirm');
    const name = confirm.dataset.session;
    confirm.hidden = true;
    if (!name) return;
    const button = $('stop-button');
    button.disabled = true;
    showBox('stop-result', 'pending', [`Stopping ${label(name)}\u2026`]);
    try {
      const rec = await api('POST', `${sessionPath(name)}/stop`);
      showBox('stop-result', 'ok', [el('strong', null, 'Stopped '), el('span', {class: 'mono'}, rec.name),
        rec.exitCode !== null && rec.exitCode !== undefined ? ` (exit code ${rec.exitCode}).` : '.']);
      touch('list');
      touch('session', name);
    } catch (e) {
      if (e.status !== 401) showBox('stop-result', 'error', resultParts(e));
    } finally {
      button.disabled = false;
    }
  }

  function contentBlock(text) {
    return el('pre', {class: 'content mono'}, text);
  }

  function renderQueue() {
    const list = $('queue');
    const q = model.queue;
    const entries = q ? q.inputs : [];
    list.replaceChildren(...entries.map((m) => el('li', {class: 'entry', 'data-id': m.id, 'data-status': m.status},
      el('div', {class: 'entry-head'},
        el('span', {class: `badge prio-${m.priority}`}, m.priority),
        el('span', {class: `pill status status-${m.status}`}, m.status),
        el('span', {class: 'mono source'}, `${m.source}${m.sourceId ? `:${m.sourceId}` : ''}`),
        m.framing ? el('span', {class: `pill framing framing-${m.kind === 'instruction' ? 'user' : 'data'}`, title: 'how the agent will be given it'}, m.framing) : null,
        el('span', {class: 'muted'}, relative('age', m.created), ' · ', relative('expires', m.expires)),
        el('span', {class: 'mono muted id', title: m.id}, shortId(m.id))),
      m.waitingBecause ? el('p', {class: 'waiting'}, m.waitingBecause) : null,
      contentBlock(m.content))));
    $('queue-count').textContent = q ? String(q.total) : '';
    $('queue-empty').hidden = !q || entries.length > 0;
  }

  function attemptsTable(attempts) {
    const rows = attempts.map((a) => el('tr', null,
      el('td', null, `#${a.number}`),
      el('td', {class: 'mono'}, a.channel),
      el('td', null, el('span', {class: `pill outcome outcome-${String(a.outcome).replace(/[^a-z_]/g, '')}`}, a.outcome)),
      el('td', null, clock(a.started)),
      el('td', null, a.finished ? span(a.finished - a.started) : 'running'),
      el('td', {class: 'mono evidence-cell'}, a.evidence)));
    return el('table', {class: 'attempts'},
      el('thead', null, el('tr', null, ...['attempt', 'channel', 'outcome', 'started', 'took', 'evidence'].map((h) => el('th', null, h)))),
      el('tbody', null, ...rows));
  }

  function renderHistory() {
    const list = $('history');
    const h = model.history;
    const messages = h ? h.messages : [];
    list.replaceChildren(...messages.map((m) => {
      const log = m.attemptLog || [];
      return el('li', {class: 'entry', 'data-id': m.id, 'data-status': m.status},
        el('div', {class: 'entry-head'},
          el('span', {class: `pill status status-${m.status}`}, m.status),
          el('span', {class: `badge prio-${m.priority}`}, m.priority),
          el('span', {class: 'mono source'}, `${m.source}${m.sourceId ? `:${m.sourceId}` : ''}`),
          m.framing ? el('span', {class: `pill framing framing-${m.kind === 'instruction' ? 'user' : 'data'}`, title: 'how the agent is given it'}, m.framing) : null,
          el('span', {class: 'muted'}, clock(m.created)),
          m.finished ? el('span', {class: 'muted'}, `ended after ${span(m.finished - m.created)}`) : null,
          el('span', {class: 'mono muted id', title: m.id}, shortId(m.id))),
        m.detail ? el('p', {class: `msg-detail status-text-${m.status}`}, m.detail) : null,
        contentBlock(m.content),
        log.length ? attemptLog(m.id, log) : null);
    }));
    $('history-count').textContent = h ? `${h.total}${h.more ? '+' : ''}` : '';
    $('history-empty').hidden = !h || messages.length > 0;
  }

  /* The attempts of a message, folded; one the person unfolded stays open
   * when an event redraws the history. */
  function attemptLog(id, log) {
    const box = el('details', {class: 'attempt-log'},
      el('summary', null, `${log.length} attempt${log.length === 1 ? '' : 's'}`),
      attemptsTable(log));
    box.open = openLogs.has(id);
    box.addEventListener('toggle', () => {
      if (box.open) openLogs.add(id); else openLogs.delete(id);
    });
    return box;
  }

  // --- toasts ---------------------------------------------------------------------------

  function toast(kind, title, body) {
    const close = el('button', {type: 'button', class: 'toast-close', 'aria-label': 'dismiss'}, '×');
    const box = el('div', {class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status', 'data-kind': kind},
      el('div', {class: 'toast-title'}, title),
      body && body.error ? el('div', {class: 'toast-body'}, body.error) : null,
      body && body.detail ? el('div', {class: 'toast-detail mono'}, body.detail) : null,
      body && body.hint ? el('div', {class: 'toast-hint'}, body.hint) : null,
      close);
    const remove = () => box.remove();
    close.addEventListener('click', remove);
    setTimeout(remove, TOAST_MS);
    const stack = $('toasts');
    stack.append(box);
    while (stack.children.length > 5) stack.firstElementChild.remove();
    return box;
  }

  // --- sending ----------------------------------------------------------------------------

  function showResult(ok, parts) {
    const box = $('send-result');
    box.className = `send-result ${ok ? 'ok' : 'error'}`;
    box.replaceChildren(...parts);
    box.hidden = false;
  }

  async function onSubmit(ev) {
    ev.preventDefault();
    const name = model.selected;
    const content = $('send-content').value;
    if (!name || !content) return;
    const button = $('send-button');
    button.disabled = true;
    try {
      const r = await api('POST', `${sessionPath(name)}/input`, {
        source: 'user', sourceId: 'dashboard', content, priority: $('send-priority').value,
      });
      const evicted = r.evicted && r.evicted.length ? ` (made way: evicted ${r.evicted.map((e) => shortId(e.id)).join(', ')})` : '';
      showResult(true, [el('strong', null, 'Queued '), el('span', {class: 'mono'}, shortId(r.id)),
        ` (${r.status})${evicted}. `,
        r.supervised ? 'Its progress shows in the history below.'
          : 'No supervisor runs for this session: it waits for `agentwrap adopt`.']);
      $('send-content').value = '';
      touch('queue', name);
      touch('history', name);
    } catch (e) {
      const b = e instanceof ApiError ? e.body : {error: String(e)};
      const parts = [el('strong', {class: 'error-title'}, b.error)];
      if (e.status) parts.push(el('span', {class: 'muted'}, ` (HTTP ${e.status})`));
      if (b.detail) parts.push(el('div', {class: 'error-detail'}, b.detail));
      if (b.hint) parts.push(el('div', {class: 'error-hint'}, b.hint));
      if (e.status !== 401) showResult(false, parts);
    } finally {
      button.disabled = false;
    }
  }

  // --- answering the question a waiting agent shows ----------------------------------

  /* The card is drawn anew only for another question (or session): redraws
   * for other events keep what the person typed and where the focus is. The
   * answer names the question's id, so a click on a card the agent has moved
   * past is refused by the server (409) instead of answering something else. */
  const asking = {shown: null, busy: false}; // shown: "session\nquestion id" on the card

  function questionText(q) {
    const item = q && q.questions && q.questions[0];
    return item ? item.question : '';
  }

  function renderQuestion(name, d) {
    const card = $('question');
    const x = d && d.explanation;
    const q = d && d.state === 'waiting_input' && x && x.question ? x.question : null;
    if (!q) {
      card.hidden = true;
      card.replaceChildren();
      asking.shown = null;
      return;
    }
    const key = `${name}\n${q.id}`;
    if (asking.shown !== key) {
      const last = $('answer-result');
      if (!last.classList.contains('error')) last.hidden = true; // a new question: the last answer is done
      card.replaceChildren(...questionCard(name, q));
      asking.shown = key;
    }
    card.dataset.question = q.id; // what an answer from this card names
    card.dataset.kind = q.kind;
    for (const b of card.querySelectorAll('.q-option')) {
      const here = Number(b.dataset.number) === q.highlighted;
      b.classList.toggle('highlighted', here);
      const cursor = b.querySelector('.q-cursor'); // a multi-select row has none
      if (cursor) cursor.hidden = !here;
    }
    setAnswering(asking.busy);
    card.hidden = false;
  }

  function questionCard(name, q) {
    const parts = [];
    parts.push(el('div', {class: 'q-head'},
      el('span', {class: `pill q-kind kind-${String(q.kind).replace(/[^a-z]/g, '')}`}, q.kind),
      q.tool ? el('span', {class: 'q-tool mono', title: 'tool'}, q.tool) : null,
      el('span', {class: 'q-id mono muted', title: 'question id: an answer names it'}, q.id)));
    parts.push(el('h3', {id: 'q-title', class: 'q-title'}, q.title || questionText(q) || 'The agent asks'));
    if (q.command) parts.push(el('pre', {class: 'q-command mono', title: 'the command it wants to run'}, q.command));
    if (q.cwd) parts.push(el('p', {class: 'q-cwd muted mono', title: 'where the command runs'}, `in ${q.cwd}`));
    const answerable = q.questions.length === 1;
    const tabs = q.tabs || [];
    if (tabs.length) {
      // several questions, one tab at a time: this card answers the tab on screen, and
      // the agent shows the next one (then a review to submit)
      parts.push(el('p', {class: 'q-tabs muted'}, `One of ${tabs.length} question${tabs.length > 1 ? 's' : ''}: `,
        ...tabs.flatMap((t, i) => [i ? ' \u00b7 ' : '', el('span', {class: 'q-tab'}, `${i + 1}. ${t}`)]),
        ' \u2014 each is answered in turn, then a review to submit.'));
    }
    q.questions.forEach((item, i) => {
      const box = el('div', {class: 'q-item'});
      if (item.header) box.append(el('span', {class: 'q-header'}, item.header));
      if (item.question && item.question !== q.title) box.append(el('p', {class: 'q-text'}, item.question));
      if (item.multiSelect && answerable) {
        box.append(multiSelectForm(name, item));
      } else {
        box.append(el('ol', {class: 'q-options'}, ...item.options.map((o, j) =>
          el('li', null, optionButton(name, q, o, j + 1, answerable)))));
      }
      parts.push(box);
      if (i === 0 && q.questions.length > 1) parts.push(el('hr', {class: 'q-rule'}));
    });
    if (!answerable) {
      parts.push(el('p', {class: 'q-note'}, 'Answer this one in the terminal: ',
        el('code', null, `agentwrap attach ${label(name)}`), ' (several questions read from a hook come next).'));
    }
    if (answerable && q.free_text_allowed && !q.questions[0].multiSelect) parts.push(freeTextForm(name, q));
    const deny = el('button', {type: 'button', class: 'q-deny', title: 'dismiss the dialog with the agent\u2019s own keys (Esc, n)'}, 'Deny');
    deny.addEventListener('click', () => sendAnswer(name, {deny: true}, 'deny'));
    parts.push(el('div', {class: 'q-actions'}, deny,
      el('span', {class: 'muted q-how'}, 'Typed into the agent with its own keys; the dialog closing is checked on screen.')));
    return parts;
  }

  function optionButton(name, q, o, position, answerable) {
    const number = o.number ?? position;
    const b = el('button', {type: 'button', class: 'q-option', 'data-number': String(number),
      'data-inert': answerable ? null : 'yes'},
      el('span', {class: 'q-num mono'}, o.key && o.number == null ? o.key : String(number)),
      el('span', {class: 'q-body'},
        el('span', {class: 'q-line'}, el('span', {class: 'q-label'}, o.label),
          el('span', {class: 'q-cursor', hidden: true}, 'agent\u2019s current choice')),
        o.description ? el('span', {class: 'q-desc'}, o.description) : null));
    if (answerable) b.addEventListener('click', () => sendAnswer(name, {option: number}, `option ${number} (${o.label})`));
    return b;
  }

  /* A multi-select question: a checkbox per option that has a box on screen (ticked as
   * the agent shows it now), and one button that has the agent tick exactly those. */
  function multiSelectForm(name, item) {
    const boxes = [];
    const rows = item.options.map((o, j) => {
      const number = o.number ?? j + 1;
      if (o.checked == null) { // "Chat about this": not a box to tick
        return el('li', null, el('div', {class: 'q-option', 'data-inert': 'yes'},
          el('span', {class: 'q-num mono'}, String(number)),
          el('span', {class: 'q-body'}, el('span', {class: 'q-label'}, o.label))));
      }
      const id = `q-box-${number}`;
      const box = el('input', {type: 'checkbox', id, class: 'q-check', 'data-number': String(number)});
      box.checked = Boolean(o.checked);
      if (/^type something/i.test(o.label)) box.dataset.inert = 'yes'; // a text field, not a box
      boxes.push(box);
      return el('li', null, el('label', {class: 'q-option q-multi', for: id}, box,
        el('span', {class: 'q-num mono'}, String(number)),
        el('span', {class: 'q-body'}, el('span', {class: 'q-label'}, o.label),
          o.description ? el('span', {class: 'q-desc'}, o.description) : null)));
    });
    const form = el('form', {class: 'q-multi-form', autocomplete: 'off'},
      el('ol', {class: 'q-options'}, ...rows),
      el('div', {class: 'q-free-row'}, el('span', {class: 'muted'}, 'Tick every choice, then'),
        el('button', {type: 'submit', class: 'q-send'}, 'Submit choices')));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const numbers = boxes.filter((b) => b.checked && b.dataset.inert !== 'yes').map((b) => Number(b.dataset.number));
      if (!numbers.length) {
        answerResult('error', [el('strong', {class: 'error-title'}, 'Tick at least one choice')]);
        return;
      }
      sendAnswer(name, {options: numbers}, `options ${numbers.join(', ')}`);
    });
    queueMicrotask(() => { for (const b of boxes) if (b.dataset.inert === 'yes') b.disabled = true; });
    return form;
  }

  function freeTextForm(name, q) {
    const input = el('input', {type: 'text', id: 'q-text-input', class: 'mono', maxlength: '1000',
      required: 'required', placeholder: 'Your own answer (one line)'});
    const form = el('form', {class: 'q-free', autocomplete: 'off'},
      el('label', {for: 'q-text-input'}, 'Or answer in your own words'),
      el('div', {class: 'q-free-row'}, input, el('button', {type: 'submit', class: 'q-send'}, 'Send')));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      if (input.value) sendAnswer(name, {text: input.value}, 'your text');
    });
    return form;
  }

  function setAnswering(busy) {
    asking.busy = busy;
    const card = $('question');
    card.classList.toggle('busy', busy);
    for (const b of card.querySelectorAll('button, input')) b.disabled = busy || b.dataset.inert === 'yes';
  }

  function answerResult(kind, parts) {
    const box = $('answer-result');
    box.className = `send-result answer-result ${kind}`;
    box.replaceChildren(...parts);
    box.hidden = false;
  }

  async function sendAnswer(name, body, what) {
    if (asking.busy) return;
    const card = $('question');
    setAnswering(true);
    answerResult('pending', [`Answering with ${what}\u2026`]);
    try {
      const a = await api('POST', `${sessionPath(name)}/answer`,
        Object.assign({questionId: card.dataset.question}, body));
      if (a.status === 'applied') {
        answerResult('ok', [el('strong', null, 'Answered. '), a.detail]);
        const input = $('q-text-input');
        if (input) input.value = '';
      } else if (a.status === 'pending') {
        answerResult('pending', [el('strong', null, 'Stored, not typed yet. '),
          a.supervised ? a.detail : 'No supervisor runs for this session: it waits for `agentwrap adopt`.']);
      } else {
        answerResult('error', [el('strong', {class: 'error-title'}, `Not answered (${a.status})`),
          el('div', {class: 'error-detail'}, a.detail),
          el('div', {class: 'error-hint'}, `answer in the terminal: agentwrap attach ${label(name)}`)]);
      }
    } catch (e) {
      if (e.status === 401) return;
      const b = e instanceof ApiError ? e.body : {error: String(e)};
      const hint = b.hint || (e.status === 409 ? 'The card shows what the agent asks now.' : null);
      answerResult('error', [el('strong', {class: 'error-title'}, b.error),
        e.status ? el('span', {class: 'muted'}, ` (HTTP ${e.status})`) : null,
        b.detail ? el('div', {class: 'error-detail'}, b.detail) : null,
        hint ? el('div', {class: 'error-hint'}, hint) : null].filter(Boolean));
      touch('session', name);
    } finally {
      setAnswering(false);
    }
  }

  // --- start ------------------------------------------------------------------------------

  async function main() {
    $('send-form').addEventListener('submit', onSubmit);
    $('launch-form').addEventListener('submit', onLaunch);
    $('launch-choice').addEventListener('change', showLaunchWhat);
    $('stop-button').addEventListener('click', askStop);
    $('stop-yes').addEventListener('click', onStop);
    $('stop-no').addEventListener('click', () => { $('stop-confirm').hidden = true; });
    $('send-content').addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) $('send-form').requestSubmit();
    });
    window.addEventListener('hashchange', () => {
      if (location.hash.startsWith('#login=')) {
        boot(); // a login link opened in a tab already showing the page
        return;
      }
      const want = idOf(wantedSession());
      if (want && want !== model.selected) select(want);
    });
    setInterval(tickClocks, 5000);
    await boot();
  }

  /* Log in if the address carries a code, then show the page and follow the stream. */
  async function boot() {
    const failed = await loginFromFragment();
    if (!token.get()) {
      showLogin(failed);
      return;
    }
    $('login').hidden = true;
    $('main').hidden = false;
    stream.start(onEvent, (everything) => {
      if (everything) loadAll();
    });
  }

  main();
})();
