/*
 * The live terminal of the session on show (issue 42): xterm.js (vendored,
 * static/vendor/) fed over /api/ws/terminal, and the "Type" mode that takes
 * over its keyboard.
 *
 * Read-only by default: keys go nowhere until the person presses "Type".
 * Then every key xterm.js turns into terminal input (Esc, Ctrl-C, arrows,
 * Enter) and every paste goes to the agent as the person's keys, the pane
 * takes the page's size, and the server tells the session's supervisor a
 * person is at the keyboard (queued messages wait). It ends with the button,
 * when the page is left, when another session is shown, or after the
 * server's idle time.
 *
 * What the server sends is tmux's own rendering of the pane, colours only
 * (no OSC 8 link, no OSC 52 clipboard write, no title survives it); the
 * terminal here also opens no link and has no clipboard addon, so even a
 * sequence that slipped through could neither run script nor write the
 * clipboard. The old read-only <pre> stays for sessions a page cannot have
 * live (another host's, a pty session's).
 *
 * Paced by what the browser has taken in: each screen frame is acknowledged
 * ({"type": "drawn", seq}) once xterm.js has parsed it (drawing is on the
 * next animation frame, of the newest state: it queues nothing), and the
 * server keeps at most three frames not yet acknowledged, so a busy browser
 * gets the pane as it is now instead of a queue of stale frames to parse.
 *
 * app.js calls window.agentwrapTerminal.show(name) when a session is shown.
 */
(() => {
  'use strict';

  const TOKEN_KEY = 'agentwrap.dashboard.token'; // app.js keeps the login there
  const FINAL = new Set([4401, 4404, 4409, 4400]); // no point in trying again

  const st = {
    name: null, ws: null, term: null, fit: null, typing: false, cols: 0, rows: 0,
    card: null, box: null, button: null, status: null, retry: null,
  };
  // what the tests and scripts/bench_page_terminal.py read
  const stats = {frames: 0, bytes: 0, wire: 0, rendered: 0, lastFrameAt: 0, lastRenderedAt: 0};

  function build() {
    if (st.card) return true;
    const screen = document.getElementById('screen');
    if (!screen || typeof Terminal === 'undefined') return false;
    st.card = screen.closest('.screen-card') || screen.parentElement;
    const head = st.card.querySelector('h3');
    st.button = document.createElement('button');
    st.button.type = 'button';
    st.button.id = 'term-type';
    st.button.className = 'term-type';
    st.button.textContent = 'Type';
    st.button.title = 'Take over: your keys go to the agent; queued messages wait';
    st.button.setAttribute('aria-pressed', 'false');
    st.button.hidden = true;
    st.button.addEventListener('click', () => request(!st.typing));
    st.status = document.createElement('span');
    st.status.id = 'term-status';
    st.status.className = 'term-status muted';
    st.status.setAttribute('role', 'status');
    (head || st.card).append(st.button, st.status);
    st.box = document.createElement('div');
    st.box.id = 'live-term';
    st.box.className = 'live-term';
    st.box.setAttribute('aria-label', "the agent's terminal");
    // a paste is the agent's to bracket (tmux knows whether it asked), not xterm's
    st.box.addEventListener('paste', (e) => {
      e.preventDefault();
      e.stopPropagation();
      if (!st.typing) return;
      const text = e.clipboardData ? e.clipboardData.getData('text/plain') : '';
      if (text) send({type: 'paste', data: text});
    }, true);
    screen.before(st.box);
    return true;
  }

  function makeTerm() {
    if (st.term) return;
    st.term = new Terminal({
      scrollback: 0, // the pane's screen, as it is: it opens at the prompt
      cursorBlink: false,
      convertEol: false,
      allowProposedApi: false,
      fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace',
      fontSize: 13,
      linkHandler: {activate: () => {}, allowNonHttpProtocols: false}, // links never open
      screenReaderMode: false,
    });
    st.fit = new FitAddon.FitAddon();
    st.term.loadAddon(st.fit);
    st.term.open(st.box);
    st.term.onData((data) => { if (st.typing) send({type: 'keys', data}); });
    window.addEventListener('resize', () => { if (st.typing) fitToPage(); });
  }

  function send(frame) {
    if (st.ws && st.ws.readyState === WebSocket.OPEN) st.ws.send(JSON.stringify(frame));
  }

  function say(text) { if (st.status) st.status.textContent = text; }

  function request(on) {
    send({type: 'takeover', on});
  }

  function setTyping(on, reason) {
    st.typing = on;
    if (!st.button) return;
    st.button.setAttribute('aria-pressed', on ? 'true' : 'false');
    st.button.textContent = on ? 'Stop typing' : 'Type';
    st.box.classList.toggle('typing', on);
    if (on) {
      say('typing: your keys go to the agent');
      fitToPage();
      st.term.focus();
    } else {
      say(reason ? `read-only (${reason})` : 'read-only');
    }
  }

  function fitToPage() {
    if (!st.fit || !st.term) return;
    const dims = st.fit.proposeDimensions();
    if (dims && dims.cols > 0 && dims.rows > 0) send({type: 'resize', cols: dims.cols, rows: dims.rows});
  }

  function onFrame(msg) {
    if (msg.type === 'screen') {
      makeTerm();
      st.card.classList.add('live');
      st.button.hidden = false;
      if (msg.cols !== st.cols || msg.rows !== st.rows) {
        st.cols = msg.cols;
        st.rows = msg.rows;
        st.term.resize(msg.cols, msg.rows); // the pane's own size, always
      }
      stats.frames += 1;
      stats.bytes += msg.data.length;
      stats.lastFrameAt = performance.now();
      const ws = st.ws;
      const seq = msg.seq;
      st.term.write(msg.data, () => {
        stats.rendered += 1;
        // parsed: the server may send another (xterm.js draws the newest state on the
        // next animation frame, whatever it parsed since: drawing queues nothing)
        if (Number.isInteger(seq) && ws === st.ws) send({type: 'drawn', seq});
        // the frame is drawn on the next animation frame: that is when a person sees it
        requestAnimationFrame(() => { stats.lastRenderedAt = performance.now(); });
      });
    } else if (msg.type === 'takeover') {
      setTyping(Boolean(msg.on), msg.reason || '');
    } else if (msg.type === 'refused') {
      say(`refused: ${msg.reason}`);
    } else if (msg.type === 'ended') {
      say(`the agent's terminal is gone (${msg.reason})`);
    }
  }

  function connect(name) {
    const token = localStorage.getItem(TOKEN_KEY);
    if (!token || !build()) return;
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const ws = new WebSocket(`${scheme}://${location.host}/api/ws/terminal?session=${encodeURIComponent(name)}`);
    st.ws = ws;
    ws.onopen = () => { ws.send(JSON.stringify({type: 'auth', token, acks: true})); say('read-only'); };
    ws.onmessage = (ev) => {
      if (ws !== st.ws) return;
      stats.wire += ev.data.length;
      let msg = null;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (msg && typeof msg.type === 'string') onFrame(msg);
    };
    ws.onclose = (ev) => {
      if (ws !== st.ws) return;
      st.ws = null;
      setTyping(false, '');
      if (FINAL.has(ev.code)) {
        st.card.classList.remove('live');
        st.button.hidden = true;
        say(ev.code === 4409 ? '' : (ev.reason || ''));
        return;
      }
      // 1013: another host's session whose host the hub cannot reach now (the reason says since when)
      say(ev.reason ? `reconnecting… (${ev.reason})` : 'reconnecting…');
      st.retry = setTimeout(() => { if (st.name === name) connect(name); }, 1000);
    };
  }

  function close() {
    clearTimeout(st.retry);
    const ws = st.ws;
    st.ws = null;
    if (ws) ws.close(1000);
    if (st.card) {
      st.card.classList.remove('live');
      st.button.hidden = true;
      st.box.classList.remove('typing');
    }
    st.typing = false;
    st.cols = 0;
    st.rows = 0;
    if (st.term) st.term.reset();
    say('');
  }

  function show(name) {
    if (name === st.name && st.ws) return;
    close();
    st.name = name || null;
    if (st.name) connect(st.name);
  }

  /** The rows the terminal shows now, as text (for tests). */
  function text() {
    if (!st.term) return '';
    const buf = st.term.buffer.active;
    const out = [];
    for (let i = 0; i < st.term.rows; i += 1) {
      const line = buf.getLine(buf.viewportY + i);
      out.push(line ? line.translateToString(true) : '');
    }
    return out.join('\n');
  }

  window.addEventListener('pagehide', close); // leaving the page gives the keyboard back
  window.agentwrapTerminal = Object.freeze({
    show, text, stats,
    typing: () => st.typing,
    size: () => (st.term ? {cols: st.term.cols, rows: st.term.rows} : null),
    takeOver: (on) => request(on !== false),
    // a key as the person pressing it sends it (typed only while taking over)
    press: (data) => { if (st.term) st.term.input(String(data), true); },
  });
})();
