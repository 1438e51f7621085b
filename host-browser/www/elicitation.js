// The demo page's dialog for an MCP server's request for input during a call
// (a pending request of kind `elicitation`, issue 35): the server's message,
// shown as text and marked as coming from the server (external_untrusted,
// never as markup), a form made of the requested schema's fields (string,
// number, integer, boolean; the defaults filled in), and three answers:
// submit (accept with the fields), decline, cancel. The runtime checks the
// content against the requested schema; a refused answer is shown as an
// error and the request stays pending.

/** The dialog, made once. */
function dialog() {
  let d = document.getElementById('elicitation');
  if (d) return d;
  d = document.createElement('dialog');
  d.id = 'elicitation';
  d.setAttribute('aria-labelledby', 'elicitation-title');
  const form = document.createElement('form');
  form.method = 'dialog';
  const title = document.createElement('h2');
  title.id = 'elicitation-title';
  const from = document.createElement('p');
  from.id = 'elicitation-from';
  const message = document.createElement('p');
  message.id = 'elicitation-message';
  message.className = 'untrusted';
  const fields = document.createElement('div');
  fields.id = 'elicitation-fields';
  const actions = document.createElement('div');
  actions.className = 'actions';
  for (const [value, label] of [['accept', 'Submit'], ['decline', 'Decline'], ['cancel', 'Cancel']]) {
    const b = document.createElement('button');
    b.value = value;
    b.id = `elicitation-${value}`;
    b.textContent = label;
    actions.append(b);
  }
  form.append(title, from, message, fields, actions);
  d.append(form);
  document.body.append(d);
  return d;
}

/** The form's content, typed as the requested schema says. */
function content(schema) {
  const out = {};
  for (const [name, field] of Object.entries(schema?.properties ?? {})) {
    const input = document.querySelector(`#elicitation-fields [name="${CSS.escape(name)}"]`);
    if (!input) continue;
    if (field.type === 'boolean') out[name] = input.checked;
    else if (input.value === '') continue;
    else if (field.type === 'number' || field.type === 'integer') out[name] = Number(input.value);
    else out[name] = input.value;
  }
  return out;
}

/**
 * Show `request` (a pending request of kind `elicitation`, its message and
 * schema resolved) and call `answer(dialog, text)` with the person's answer:
 * the text `respond` takes (`decline`, `cancel`, or the accepted content),
 * or null when the dialog closed without a button (Escape, the page going
 * away): nothing is answered then and the request stays pending.
 */
export function showElicitation(request, answer) {
  const d = dialog();
  const kind = request.kind;
  const schema = kind.answer_schema ?? { properties: {} };
  document.getElementById('elicitation-title').textContent = 'A server asks for input';
  document.getElementById('elicitation-from').textContent =
    `MCP server ${kind.server}, during call ${kind.call_id}. Its message (from the server, not checked):`;
  document.getElementById('elicitation-message').textContent = kind.question_text ?? '';
  const fields = document.getElementById('elicitation-fields');
  fields.replaceChildren(...Object.entries(schema.properties ?? {}).map(([name, field]) => {
    const label = document.createElement('label');
    label.textContent = `${field.title ?? name}${(schema.required ?? []).includes(name) ? ' (required)' : ''}`;
    const input = document.createElement('input');
    input.name = name;
    input.autocomplete = 'off';
    if (field.type === 'boolean') {
      input.type = 'checkbox';
      input.checked = field.default === true;
    } else {
      input.type = field.type === 'number' || field.type === 'integer' ? 'number' : 'text';
      if (field.default !== undefined) input.value = String(field.default);
    }
    label.append(' ', input);
    return label;
  }));
  d.dataset.request = request.id;
  d.dataset.run = request.run;
  d.onclose = () => {
    if (d.dataset.request !== request.id) return;
    const action = d.returnValue;
    if (!['accept', 'decline', 'cancel'].includes(action)) { answer(d, null); return; }
    const text = action === 'accept' ? JSON.stringify({ action: 'accept', content: content(schema) }) : action;
    answer(d, text);
  };
  d.showModal();
}
