// The model picker of the new-Session form and the Session view: a select
// of the models the Hub offers (paths.models: what every Runner the person
// may use takes) and, beside it, the efforts the chosen model takes, shown
// only where it takes any. The Hub refuses anything else; the picker only
// keeps a person from asking for it.
import { api } from "./app.js";
import * as paths from "./paths.js";

// modelPicker fills form's model and effort selects from the offer, and
// returns set(model, effort), which shows a Session's own: one no Runner
// offers any more stays, marked so, until the person picks another.
export async function modelPicker(form) {
  const model = form.elements.model;
  const effort = form.elements.effort;
  const offer = (await api("GET", paths.models)).models || [];
  const def = offer.find((m) => m.default);
  model.replaceChildren(
    new Option(def ? `default (${def.display_name})` : "default", ""),
    ...offer.map((m) => new Option(`${m.display_name} (${m.alias})`, m.alias)),
  );
  const chosen = () => (model.value === "" ? def : offer.find((m) => m.alias === model.value));
  const showEfforts = (want) => {
    const efforts = chosen()?.efforts || [];
    effort.replaceChildren(new Option("default", ""), ...efforts.map((e) => new Option(e)));
    if (want && !efforts.includes(want)) effort.append(new Option(`${want} (not taken)`, want));
    effort.value = want || "";
    effort.closest("label").hidden = effort.options.length === 1;
  };
  model.addEventListener("change", () => showEfforts(chosen()?.efforts?.includes(effort.value) ? effort.value : ""));
  showEfforts("");
  return (m, e) => {
    const known = offer.find((o) => o.alias === m || o.id === m);
    if (m && !known && ![...model.options].some((o) => o.value === m)) model.append(new Option(`${m} (not offered)`, m));
    model.value = known ? known.alias : m || "";
    showEfforts(e || "");
  };
}
