/*
 * The conversation of the session on show, and the sessions that ended (issue 42).
 *
 * Conversation: GET /api/sessions/NAME/conversation, in order: the person's
 * prompts, each message agentwrap delivered where it landed (its id, status
 * and whether its ACK came), the agent's replies and tool calls, questions
 * and answers. Fetched when a session is shown and again (coalesced, one
 * request at a time) when an event of that session says something changed.
 *
 * Ended: the sessions that ended, kept until dismissed or until
 * [sessions] keep_ended_s passes: each shows its exit code, why it ended and
 * when; selecting one shows its history, conversation and last screen
 * read-only (the page's own views: app.js), and "Dismiss" forgets it
 * (POST /api/sessions/NAME/dismiss).
 *
 * Safety: every value is content a model or a sender wrote. It reaches the
 * page only as text (textContent / text nodes, never innerHTML), with
 * control and invisible characters shown as visible marks, so nothing in a
 * reply can become markup, run, or hide text. The CSP is the page's own.
 *
 * app.js calls window.agentwrapConversation.show(name) when a session is
 * shown, .event(ev, name) for each event, and .ended(list, selected, select,
 * reload) when it draws the sessions list.
 */
(() => {
  'use strict';

  const TOKEN_KEY = 'agentwrap.dashboard.token'; // app.js keeps the login there
  const LIMIT = 500;
  const AGAIN_MS = 250; // events of one burst: one fetch
  const INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u061c\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]/gu;
  const KIND_LABEL = {prompt: 'you', message: 'message', reply: 'agent', tool: 'tool',
    question: 'asked', answer: 'answer'};

  const st = {name: null, busy: false, again: false, timer: null, data: null};

  const enc = encodeURIComponent;
  const $ = (id) => document.getElementById(id);

  /* Text as the person should see it: invisible characters as visible marks. */
  function visible(text) {
    return String(text ?? '').replace(INVISIBLE, (c) =>
      `\u2039U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}\u203a`);
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) node.setAttribute(k, v);
    for (const c of children) {
      if (c === null || c === undefined) continue;
      node.append(typeof c === 'string' ? document.createTextNode(visible(c)) : c);
    }
    return node;
  }

  async function call(method, path) {
    const token = localStorage.getItem(TOKEN_KEY);
    const res = await fetch(path, {method, cache: 'no-store',
      headers: token ? {Authorization: `Bearer ${token}`} : {}});
    let body = null;
    try { body = await res.json(); } catch (e) { body = null; }
    if (!res.ok) {
      const err = new Error((body && body.error) || `HTTP ${res.status}`);
      err.status = res.status;
      err.body = body || {};
      throw err;
    }
    return body;
  }

  const clock = (s) => new Date(s * 1000).toLocaleTimeString();

  // --- the conversation -----------------------------------------------------------------

  function show(name) {
    st.name = name;
    st.data = null;
    render();
    if (name) load();
  }

  function event(ev, name) {
    if (!st.name || name !== st.name) return;
    const type = String(ev.type || '');
    if (type.startsWith('message.') || type.startsWith('session.')) schedule();
  }

  function schedule() {
    if (st.timer) return;
    st.timer = setTimeout(() => { st.timer = null; load(); }, AGAIN_MS);
  }

  async function load() {
    if (st.busy) { st.again = true; return; }
    const name = st.name;
    st.busy = true;
    try {
      const data = await call('GET', `/api/sessions/${enc(name)}/conversation?limit=${LIMIT}`);
      if (name === st.name) { st.data = data; render(); }
    } catch (e) {
      if (name === st.name) { st.data = {error: e.message, entries: []}; render(); }
    } finally {
      st.busy = false;
      if (st.again) { st.again = false; load(); }
    }
  }

  function ackLabel(e) {
    if (e.acked === true) return 'ACK';
    if (e.acked === false) return 'no ACK';
    return 'no ACK asked';
  }

  function entryNode(e) {
    const head = el('div', {class: 'conv-head'},
      el('span', {class: 'conv-who'}, KIND_LABEL[e.kind] || String(e.kind)),
      el('time', {class: 'conv-at muted'}, clock(e.at)));
    if (e.kind === 'message') {
      head.append(el('span', {class: 'conv-id mono'}, String(e.messageId).slice(0, 8)),
        el('span', {class: 'conv-from mono muted'}, e.target),
        el('span', {class: `conv-status status-${String(e.status).replace(/[^a-z_]/g, '')}`}, e.status),
        el('span', {class: `conv-ack ack-${e.acked === true ? 'yes' : e.acked === false ? 'no' : 'none'}`}, ackLabel(e)));
    } else if (e.kind === 'tool') {
      head.append(el('span', {class: 'conv-tool mono'}, e.tool));
    }
    if (e.source && e.source !== 'queue' && e.source !== 'transcript') {
      head.append(el('span', {class: 'conv-source muted'}, `from the ${e.source}`));
    }
    const text = e.kind === 'tool' ? (e.target || e.text) : e.text;
    return el('li', {class: `conv conv-${String(e.kind).replace(/[^a-z]/g, '')}`, 'data-kind': e.kind,
      'data-message-id': e.messageId || null, 'data-status': e.status || null,
      'data-acked': e.acked === null || e.acked === undefined ? null : String(e.acked)},
    head, el('pre', {class: 'conv-text'}, text));
  }

  function render() {
    const list = $('conversation');
    const empty = $('conversation-empty');
    const meta = $('conversation-meta');
    if (!list) return;
    const d = st.data;
    const entries = d && d.entries ? d.entries : [];
    list.replaceChildren(...entries.map(entryNode));
    empty.hidden = entries.length > 0;
    empty.textContent = d && d.error ? visible(`Could not read it: ${d.error}`)
      : d ? 'Nothing said yet.' : 'Loading…';
    meta.textContent = d && d.source && d.source !== 'none' ? `read from the agent's ${d.source}` : '';
  }

  // --- ended sessions ----------------------------------------------------------------------

  function ended(sessions, selected, select, reload) {
    const list = $('ended-list');
    const card = $('ended');
    if (!list || !card) return;
    card.hidden = sessions.length === 0;
    $('ended-count').textContent = sessions.length ? String(sessions.length) : '';
    list.replaceChildren(...sessions.map((s) => {
      const id = s.host ? `${s.host}/${s.name}` : s.name;
      const open = el('button', {type: 'button', class: 'session-card ended-card',
        'aria-current': id === selected ? 'true' : null},
      el('span', {class: 'card-top'}, el('span', {class: 'session-name mono'}, s.name),
        el('span', {class: 'tag ended-exit'}, `exit ${s.exitCode ?? '?'}`)),
      el('span', {class: 'card-why ended-reason'}, s.endReason || 'ended'),
      el('span', {class: 'card-state muted ended-when'}, s.ended ? `ended ${clock(s.ended)} · ${s.profile}` : s.profile));
      open.addEventListener('click', () => select(id));
      const dismiss = el('button', {type: 'button', class: 'dismiss-button',
        title: 'forget this ended session (its messages stay in the history)'}, 'Dismiss');
      dismiss.addEventListener('click', async () => {
        dismiss.disabled = true;
        try {
          await call('POST', `/api/sessions/${enc(id)}/dismiss`);
          if (id === selected) select(null);
        } catch (e) {
          dismiss.disabled = false;
          dismiss.title = visible(e.message);
        }
        reload();
      });
      return el('li', {'data-address': id, 'data-session': s.name, 'data-exit-code': String(s.exitCode ?? '')},
        open, dismiss);
    }));
  }

  window.agentwrapConversation = {show, event, ended};
})();
