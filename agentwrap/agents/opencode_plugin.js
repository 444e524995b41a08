// agentwrap's OpenCode plugin, for one launch of one session (issue 22).
//
// `agentwrap run` writes this file, with COMMANDS filled in, into the
// session's private launch dir and names it in an extra config given with
// OPENCODE_CONFIG (agentwrap/agents/opencode.py says why that way). OpenCode
// (1.18.33) has no command hooks, only plugins; this one turns the plugin
// events agentwrap needs into runs of agentwrap's own hook command, the one
// Claude Code or Qwen Code runs (the native client agentwrap-hook, or
// `python -m agentwrap hook opencode EVENT`), with a JSON payload on stdin:
//
// * "chat.message" (a prompt of the person's goes to the model): a signal;
// * "tool.execute.after" (a tool call has run): waited for; what the hook
//   prints ({"additionalContext": TEXT}) is appended to the tool's result,
//   which the model reads in its next request (the hand-over between tool
//   calls);
// * "session.idle" (the turn ended), "permission.asked" and "question.asked"
//   (a dialog opens): signals, not waited for.
//
// A subagent's session (one with a parent) is left out: what it is handed
// would go to the subagent, never to the session's own model. Nothing here
// ever throws into OpenCode: a failed or slow hook means no output.
import { spawn } from "node:child_process";

/** event -> the shell command of agentwrap's hook for it (filled in by agentwrap). */
const COMMANDS = /*AGENTWRAP_COMMANDS*/ {};
/** Longest wait for a hook's answer (the hooks' own limit is 10 s). */
const WAIT_MS = 10000;
/** Sessions of subagents (their session.created event names a parent). */
const children = new Set();

function run(event, payload, wait) {
  const command = COMMANDS[event];
  if (!command) return Promise.resolve("");
  return new Promise((resolve) => {
    let out = "";
    let done = false;
    const finish = (text) => { if (!done) { done = true; resolve(text); } };
    try {
      const child = spawn("/bin/sh", ["-c", command], {
        stdio: ["pipe", wait ? "pipe" : "ignore", "ignore"],
        detached: !wait,
      });
      child.on("error", () => finish(""));
      if (wait) {
        child.stdout.on("data", (chunk) => { out += chunk; });
        child.on("close", () => finish(out));
        setTimeout(() => { try { child.kill(); } catch (e) {} finish(""); }, WAIT_MS);
      } else {
        child.unref();
        finish("");
      }
      child.stdin.on("error", () => {});
      child.stdin.end(JSON.stringify({ hook_event_name: event, ...payload }));
    } catch (e) {
      finish("");
    }
  });
}

function context(text) {
  try {
    const answer = JSON.parse(text);
    return typeof answer?.additionalContext === "string" ? answer.additionalContext : "";
  } catch (e) {
    return "";
  }
}

export const AgentwrapPlugin = async ({ directory }) => ({
  event: async ({ event }) => {
    const props = event?.properties ?? {};
    if (event?.type === "session.created" && props.info?.parentID) {
      children.add(props.info.id);
      return;
    }
    if (children.has(props.sessionID)) return;
    if (event?.type === "session.idle") {
      run("session.idle", { session_id: props.sessionID, cwd: directory }, false);
    } else if (event?.type === "permission.asked" || event?.type === "question.asked") {
      run(event.type, {
        session_id: props.sessionID, cwd: directory, message: props.permission ?? "question",
      }, false);
    }
  },
  "chat.message": async (input, output) => {
    if (children.has(input?.sessionID)) return;
    const prompt = (output?.parts ?? [])
      .filter((p) => p?.type === "text" && !p.synthetic)
      .map((p) => p.text)
      .join("\n");
    run("chat.message", { session_id: input?.sessionID, cwd: directory, prompt }, false);
  },
  "tool.execute.after": async (input, output) => {
    if (children.has(input?.sessionID) || typeof output?.output !== "string") return;
    const text = context(await run("tool.execute.after", {
      session_id: input.sessionID, cwd: directory, tool_name: input.tool,
      tool_input: input.args ?? {},
    }, true));
    if (text) output.output += "\n\n" + text;
  },
});
