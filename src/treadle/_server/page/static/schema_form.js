// A form generated from a JSON schema (pydantic's dialect: $defs/$ref,
// anyOf with null for optional values). A field is never given a value its
// schema does not default to, and no decision is taken by a default: a
// required boolean or enum without a default is a decision, drawn as one
// button per value, none pressed, and read() refuses the form until one is
// chosen; booleans with a default are checkboxes, other enums selects;
// strings text inputs (a required one refused empty), numbers number
// inputs, objects fieldsets; what a form cannot show well (arrays, maps,
// unions) is a JSON text area. Beyond those two refusals the form does not
// validate: the server does, strictly, and its per-field errors come back
// through showErrors() next to the fields they name.

import { h, withCode } from "./dom.js";

let forms = 0;

/**
 * Builds a form for `schema`.
 * Returns {element, read, showErrors, clearErrors, decisions}: read() gives
 * {ok: true, value} or {ok: false, errors: [{loc, message}]} (text that is not JSON,
 * a decision not taken, a required text left empty);
 * showErrors(fields) places each {loc, message} at its field and returns those it could not place;
 * decisions() lists the decisions taken, as "Title: Value", for a confirmation to name them.
 */
export function schemaForm(schema, { legend = "Value", idPrefix } = {}) {
  const root = schema && typeof schema === "object" ? schema : {};
  const defs = root.$defs || root.definitions || {};
  const prefix = idPrefix || `form${++forms}`;
  const fields = new Map(); // dotted path -> {input, error, wrapper}
  const taken = []; // () => "Title: Value" of each decision, or null while not taken
  let ids = 0;

  function resolve(node, seen = new Set()) {
    let current = node && typeof node === "object" ? node : {};
    while (current.$ref && !seen.has(current.$ref)) {
      seen.add(current.$ref);
      const name = current.$ref.split("/").pop();
      const { $ref, ...rest } = current;
      current = { ...(defs[name] || {}), ...rest };
    }
    if (Array.isArray(current.allOf) && current.allOf.length === 1) {
      const { allOf, ...rest } = current;
      return resolve({ ...allOf[0], ...rest }, seen);
    }
    return current;
  }

  /** The schema without its "or null" alternative, and whether null was one. */
  function unwrapNull(node) {
    const s = resolve(node);
    const options = s.anyOf || s.oneOf;
    if (Array.isArray(options)) {
      const others = options.filter((o) => resolve(o).type !== "null");
      if (others.length === 1 && others.length < options.length) {
        const { anyOf, oneOf, ...rest } = s;
        return { schema: { ...resolve(others[0]), ...rest }, nullable: true };
      }
    }
    if (Array.isArray(s.type)) {
      const types = s.type.filter((t) => t !== "null");
      if (types.length === 1) return { schema: { ...s, type: types[0] }, nullable: types.length < s.type.length };
    }
    return { schema: s, nullable: false };
  }

  function kindOf(s, nullable) {
    if (Array.isArray(s.enum)) return "enum";
    if ("const" in s) return "const";
    // A checkbox always holds a value: only a boolean with a default may be one.
    if (s.type === "boolean") return nullable || !("default" in s) ? "enum" : "boolean";
    if (s.type === "string") return "string";
    if (s.type === "integer" || s.type === "number") return "number";
    if ((s.type === "object" || s.properties) && s.properties && !nullable) return "object";
    return "json";
  }

  function newId(path) {
    ids += 1;
    return `${prefix}-${path.replace(/[^A-Za-z0-9_-]/g, "_") || "value"}-${ids}`;
  }

  function register(path, input, wrapper, describedBy) {
    const error = h("p", { class: "field-error", id: `${input.id}-error`, hidden: true });
    input.setAttribute("aria-describedby", [describedBy, error.id].filter(Boolean).join(" "));
    wrapper.append(error);
    fields.set(path, { input, error, wrapper });
  }

  function build(node, path, label, required) {
    const { schema: s, nullable } = unwrapNull(node);
    const hasDefault = "default" in s;
    let kind = kindOf(s, nullable);
    // A value the person must choose, and nothing chooses for them: a decision.
    if (kind === "enum" && required && !hasDefault) kind = "decision";
    const title = label || s.title || "Value";
    const help = s.description ? h("small", { class: "help", id: `${prefix}-help-${++ids}` }, withCode(s.description)) : null;

    if (kind === "object") {
      const fieldset = h("fieldset", { class: "object", "data-path": path });
      fieldset.append(h("legend", {}, title));
      if (help) fieldset.append(help);
      const need = new Set(s.required || []);
      const children = Object.entries(s.properties).map(([name, sub]) => {
        const childPath = path ? `${path}.${name}` : name;
        const resolved = resolve(sub);
        const child = build(sub, childPath, resolved.title || name, need.has(name));
        fieldset.append(child.element);
        return [name, child];
      });
      fieldset.id = newId(path);
      register(path, fieldset, fieldset, help && help.id);
      return {
        element: fieldset,
        read(errors) {
          const value = {};
          for (const [name, child] of children) {
            const got = child.read(errors);
            if (got.present) value[name] = got.value;
          }
          return { present: true, value };
        },
      };
    }

    const id = newId(path);
    const wrapper = h("div", { class: `field field-${kind}`, "data-path": path });
    const labelText = [title, required ? null : " (optional)"];
    let input;
    let read;

    if (kind === "decision") {
      const choices = [...(Array.isArray(s.enum) ? s.enum : [true, false]), ...(nullable ? [null] : [])];
      const labelId = `${id}-label`;
      input = h("div", { id, class: "decision", role: "group", "aria-labelledby": labelId });
      let chosen;
      const buttons = choices.map((choice) => {
        const button = h(
          "button",
          { type: "button", class: "choice", "aria-pressed": "false", "data-value": JSON.stringify(choice) },
          choiceLabel(choice),
        );
        button.addEventListener("click", () => {
          chosen = { value: choice };
          for (const other of buttons) other.setAttribute("aria-pressed", String(other === button));
          const entry = fields.get(path);
          if (entry) clearField(entry);
        });
        return button;
      });
      input.append(...buttons);
      wrapper.append(h("span", { class: "label", id: labelId }, title), input);
      const names = choices.map(choiceLabel).join(" or ");
      read = (errors) => {
        if (chosen === undefined) {
          errors.push({ loc: path, message: `choose one: ${names}` });
          return { present: false };
        }
        return { present: true, value: chosen.value };
      };
      taken.push(() => (chosen === undefined ? null : `${title}: ${choiceLabel(chosen.value)}`));
    } else if (kind === "boolean") {
      input = h("input", { type: "checkbox", id, name: path || "value", checked: hasDefault ? Boolean(s.default) : false });
      wrapper.append(input, h("label", { for: id }, ...labelText));
      read = () => ({ present: true, value: input.checked });
    } else if (kind === "enum" || kind === "const") {
      const choices = kind === "const" ? [s.const] : Array.isArray(s.enum) ? s.enum : [true, false];
      input = h("select", { id, name: path || "value" });
      const blank = !required || nullable || !hasDefault;
      if (blank) input.append(h("option", { value: "" }, nullable ? "(none)" : "(choose)"));
      for (const choice of choices) {
        input.append(h("option", { value: JSON.stringify(choice), selected: hasDefault && s.default === choice }, String(choice)));
      }
      if (kind === "const") input.value = JSON.stringify(s.const);
      wrapper.append(h("label", { for: id }, ...labelText), input);
      // Nothing chosen sends nothing: the server names the field a decision is missing from.
      read = () => {
        if (input.value === "") return nullable ? { present: required || hasDefault, value: null } : { present: false };
        return { present: true, value: JSON.parse(input.value) };
      };
    } else if (kind === "string") {
      const long = (s.maxLength || 0) > 200 || s.format === "textarea";
      input = long
        ? h("textarea", { id, name: path || "value", rows: 3 })
        : h("input", { type: "text", id, name: path || "value", autocomplete: "off" });
      if (s.format === "date-time") input.placeholder = "2025-01-31T12:00:00Z";
      if (hasDefault && s.default !== null) input.value = String(s.default);
      wrapper.append(h("label", { for: id }, ...labelText), input);
      read = (errors) => {
        if (input.value === "" && nullable) return { present: required || hasDefault, value: null };
        if (input.value === "" && !required) return { present: false };
        if (required && input.value.trim() === "") {
          errors.push({ loc: path, message: "required: write something" });
          return { present: false };
        }
        return { present: true, value: input.value };
      };
    } else if (kind === "number") {
      input = h("input", { type: "number", id, name: path || "value", step: s.type === "integer" ? "1" : "any", inputmode: "decimal" });
      if (hasDefault && s.default !== null) input.value = String(s.default);
      wrapper.append(h("label", { for: id }, ...labelText), input);
      read = () => {
        if (input.value === "") return { present: required || nullable, value: null };
        return { present: true, value: Number(input.value) };
      };
    } else {
      const initial = hasDefault ? s.default : s.type === "array" ? [] : s.type === "object" ? {} : undefined;
      input = h("textarea", { id, name: path || "value", rows: 3, class: "json-input", spellcheck: "false" });
      if (initial !== undefined) input.value = JSON.stringify(initial, null, 2);
      const hint = h("small", { class: "help" }, "JSON");
      wrapper.append(h("label", { for: id }, ...labelText, " "), hint, input);
      read = (errors) => {
        if (input.value.trim() === "") return { present: required || nullable, value: null };
        try {
          return { present: true, value: JSON.parse(input.value) };
        } catch (error) {
          errors.push({ loc: path, message: `not valid JSON: ${error.message}` });
          return { present: false };
        }
      };
    }
    if (help) wrapper.append(help);
    register(path, input, wrapper, help && help.id);
    return { element: wrapper, read };
  }

  const top = build(root, "", legend, true);

  // "Edit as JSON": while open, its text is sent instead of the fields, so any
  // shape can be tried (the server says what does not fit, field by field).
  const jsonId = `${prefix}-json`;
  const jsonArea = h("textarea", { id: jsonId, rows: 5, class: "json-input", spellcheck: "false" });
  const jsonSummary = h("summary", {}, "Edit as JSON");
  const jsonEditor = h(
    "details",
    { class: "json-editor" },
    jsonSummary,
    h("label", { for: jsonId }, "While this is open, this JSON is sent instead of the fields above"),
    jsonArea,
  );
  const jsonError = h("p", { class: "field-error", id: `${jsonId}-error`, hidden: true });
  jsonArea.setAttribute("aria-describedby", jsonError.id);
  jsonEditor.append(jsonError);
  // On the click that opens it (not on "toggle", which comes later): the
  // fields' value is there before anyone can type.
  jsonSummary.addEventListener("click", () => {
    if (!jsonEditor.open && jsonArea.value.trim() === "") {
      const errors = [];
      const got = top.read(errors);
      jsonArea.value = JSON.stringify(got.present ? got.value : null, null, 2);
    }
  });

  const element = h("div", { class: "schema-form" }, top.element, jsonEditor);

  function setError(entry, message) {
    entry.error.textContent = message;
    entry.error.hidden = false;
    entry.input.setAttribute("aria-invalid", "true");
    entry.wrapper.classList.add("invalid");
  }

  function clearField(entry) {
    entry.error.textContent = "";
    entry.error.hidden = true;
    entry.input.removeAttribute("aria-invalid");
    entry.wrapper.classList.remove("invalid");
  }

  function clearErrors() {
    for (const entry of fields.values()) clearField(entry);
    jsonError.hidden = true;
    jsonError.textContent = "";
  }

  /** The field a server's loc names: exact, else its nearest enclosing field, else the top. */
  function fieldFor(loc) {
    let path = Array.isArray(loc) ? loc.join(".") : loc === null || loc === undefined ? "" : String(loc);
    const candidates = [path, path.replace(/^(answer|input|body)\.?/, "")];
    for (let candidate of candidates) {
      while (true) {
        if (fields.has(candidate)) return fields.get(candidate);
        const cut = candidate.lastIndexOf(".");
        if (cut < 0) break;
        candidate = candidate.slice(0, cut);
      }
    }
    return null;
  }

  function showErrors(list) {
    const unplaced = [];
    const messages = new Map();
    for (const item of list || []) {
      const entry = fieldFor(item.loc);
      if (!entry) {
        unplaced.push(item);
        continue;
      }
      const loc = Array.isArray(item.loc) ? item.loc.join(".") : String(item.loc ?? "");
      const exact = fields.get(loc) === entry;
      const text = exact || !loc ? item.message : `${loc}: ${item.message}`;
      messages.set(entry, [...(messages.get(entry) || []), text]);
    }
    for (const [entry, texts] of messages) setError(entry, texts.join("; "));
    if (jsonEditor.open && list && list.length) {
      jsonError.textContent = list
        .map((item) => `${Array.isArray(item.loc) ? item.loc.join(".") : item.loc || "(answer)"}: ${item.message}`)
        .join("\n");
      jsonError.hidden = false;
    }
    return unplaced;
  }

  function read() {
    if (jsonEditor.open) {
      try {
        return { ok: true, value: JSON.parse(jsonArea.value) };
      } catch (error) {
        jsonError.textContent = `not valid JSON: ${error.message}`;
        jsonError.hidden = false;
        return { ok: false, errors: [] };
      }
    }
    const errors = [];
    const got = top.read(errors);
    if (errors.length) return { ok: false, errors };
    return { ok: true, value: got.present ? got.value : null };
  }

  function decisions() {
    return jsonEditor.open ? [] : taken.map((said) => said()).filter(Boolean);
  }

  return { element, read, showErrors, clearErrors, decisions };
}

/** How a decision's value reads on its button: Yes / No, a word capitalized, None. */
function choiceLabel(choice) {
  if (choice === true) return "Yes";
  if (choice === false) return "No";
  if (choice === null) return "None";
  const text = String(choice);
  return text.charAt(0).toUpperCase() + text.slice(1);
}
