// What every SDK compatibility script prints and how it judges: one JSON line per check,
// {"method", "ok", "detail"}, and `failures()` for the exit status.

import { SandboxAgentError } from "sandbox-agent";

const CALL_TIMEOUT_MS = Number(process.env.SANDBOX_CALL_TIMEOUT_MS || 15000);
let failed = 0;

export function failures() {
  return failed;
}

export function emit(method, ok, detail) {
  if (!ok) failed += 1;
  process.stdout.write(JSON.stringify({ method, ok, detail }) + "\n");
}

/** Runs one check: `fn` returns a short detail string or throws; a hung call fails after the timeout. */
export async function check(method, fn) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${CALL_TIMEOUT_MS} ms`)), CALL_TIMEOUT_MS);
  });
  try {
    const detail = await Promise.race([fn(), timeout]);
    emit(method, true, detail ?? "");
    return true;
  } catch (error) {
    emit(method, false, describe(error));
    return false;
  } finally {
    clearTimeout(timer);
  }
}

export function describe(error) {
  if (error instanceof SandboxAgentError) {
    return `SandboxAgentError ${error.status}: ${JSON.stringify(error.problem ?? null)}`;
  }
  return error instanceof Error ? error.message : String(error);
}

export function expect(condition, message) {
  if (!condition) throw new Error(message);
}

export function equal(what, actual, expected) {
  expect(JSON.stringify(actual) === JSON.stringify(expected),
    `${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
}

/** Polls `fn` until it returns a truthy value (bounded), else fails naming `what`. */
export async function poll(what, fn, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (let i = 0; i < 1000 && Date.now() < deadline; i += 1) {
    last = await fn();
    if (last) return last;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
}
