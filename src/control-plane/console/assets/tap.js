import { stream } from '/console/api.js';
import { html, useEffect, useRef, useState } from '/console/vendor/preact-htm.js';

// What the console's live views share: one tap stream at a time (a subscription's, a filter
// preview's, an endpoint's) with its last events, and the list that shows them.

const SHOWN = 50;
const TYPING_PAUSE_MS = 300;

/**
 * Runs one stream at a time (`start` replaces the current one) and keeps its last SHOWN events,
 * newest first, with the tap's counts and how it ended.
 */
export function useTapStream() {
  const [state, setState] = useState({ events: [], status: 'idle', error: undefined, info: '' });
  const current = useRef();
  const stop = () => current.current?.abort();
  useEffect(() => stop, []);
  function start(method, path, body) {
    stop();
    const abort = new AbortController();
    current.current = abort;
    setState({ events: [], status: 'opening', error: undefined, info: '' });
    const onEvent = (name, data) => {
      if (abort.signal.aborted) return;
      if (name === 'open') {
        const info = `at most ${data.rate}/s, for ${data.max_seconds} s`;
        setState((s) => ({ ...s, status: 'open', info }));
      } else if (name === 'event') {
        setState((s) => ({ ...s, events: [data, ...s.events].slice(0, SHOWN) }));
      } else if (name === 'end') {
        const info = `ended (${data.reason}): ${data.shown} shown of ${data.matched} matched`;
        setState((s) => ({ ...s, status: 'ended', info }));
      }
    };
    stream(method, path, { body, signal: abort.signal, onEvent }).catch((error) => {
      if (!abort.signal.aborted) setState((s) => ({ ...s, status: 'failed', error }));
    });
  }
  return { state, start, stop };
}

/** One tapped event as its JSON. */
const asJson = (event) => html`<pre>${JSON.stringify(event)}</pre>`;

/** The tap's status and its events, newest first, each drawn by `show` (its JSON by default). */
export function TapEvents({ state, show = asJson }) {
  return html`<div class="tap">
    <p class="tap-status" data-status=${state.status}>${state.status} ${state.info}</p>
    <ol class="tap-events">
      ${state.events.map(
        (message) => html`<li key=${message.shown}>
          ${message.sampled && html`<span class="sampled">sample: ${message.skipped} skipped</span>`}
          ${show(message.event)}
        </li>`,
      )}
    </ol>
  </div>`;
}

/** Calls `check` once typing pauses: `inputs` unchanged for TYPING_PAUSE_MS. */
export function useTypingPause(check, inputs) {
  useEffect(() => {
    const timer = setTimeout(check, TYPING_PAUSE_MS);
    return () => clearTimeout(timer);
  }, inputs);
}
