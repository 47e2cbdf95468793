"""The Space's widget: one tab per config of the clopper_pearson_accuracy metric.

Inputs are JSON lists typed into text boxes; errors from the metric (every bad input raises a
``ValueError`` that names the value and what is allowed) are shown as Gradio errors.
"""

import json
from pathlib import Path

import evaluate
import gradio as gr

HERE = Path(__file__).resolve().parent
SCRIPT = str(HERE / "clopper_pearson_accuracy.py")
accuracy_metric = evaluate.load(SCRIPT)
fit_metric = evaluate.load(SCRIPT, "linear_fit")


def _json_list(text, name):
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise gr.Error(f"{name} is not a JSON list ({error}); write e.g. [0, 1, 2]") from None


def _whole(value, name):
    if value is None or float(value) != int(value):
        raise gr.Error(f"{name} must be a whole number; got {value!r}")
    return int(value)


def accuracy(predictions, references, confidence_level):
    try:
        return accuracy_metric.compute(
            predictions=_json_list(predictions, "predictions"),
            references=_json_list(references, "references"),
            confidence_level=float(confidence_level),
        )
    except ValueError as error:
        raise gr.Error(str(error)) from None


def linear_fit(original_accuracy, new_accuracy, scale, n_bootstrap, confidence_level, seed):
    try:
        return fit_metric.compute(
            original_accuracy=_json_list(original_accuracy, "original_accuracy"),
            new_accuracy=_json_list(new_accuracy, "new_accuracy"),
            scale=scale,
            n_bootstrap=_whole(n_bootstrap, "n_bootstrap"),
            confidence_level=float(confidence_level),
            seed=_whole(seed, "seed"),
        )
    except ValueError as error:
        raise gr.Error(str(error)) from None


def _card():
    """The README without its YAML front matter."""
    text = (HERE / "README.md").read_text(encoding="utf-8")
    return text.split("---", 2)[2] if text.startswith("---") else text


with gr.Blocks(title="Clopper-Pearson Accuracy") as demo:
    gr.Markdown("# Clopper-Pearson Accuracy\n" + accuracy_metric.info.description)
    with gr.Tab("accuracy (default)"):
        predictions = gr.Textbox(
            label="predictions: class ids, or ranked top-k lists", value="[0, 1, 2, 2]"
        )
        references = gr.Textbox(label="references: class ids", value="[0, 1, 1, 2]")
        level = gr.Number(label="confidence_level", value=0.95)
        result = gr.JSON(label="result")
        gr.Button("Compute").click(accuracy, [predictions, references, level], result)
    with gr.Tab("linear_fit"):
        original = gr.Textbox(
            label="original_accuracy (fractions)", value="[0.60, 0.65, 0.70, 0.75, 0.80]"
        )
        new = gr.Textbox(label="new_accuracy (fractions)", value="[0.47, 0.52, 0.58, 0.63, 0.69]")
        scale = gr.Dropdown(choices=["linear", "probit", "logit"], value="linear", label="scale")
        n_bootstrap = gr.Number(label="n_bootstrap", value=100_000, precision=0)
        fit_level = gr.Number(label="confidence_level", value=0.95)
        seed = gr.Number(label="seed", value=0, precision=0)
        fit_result = gr.JSON(label="result")
        gr.Button("Fit").click(
            linear_fit, [original, new, scale, n_bootstrap, fit_level, seed], fit_result
        )
    gr.Markdown(_card())

if __name__ == "__main__":
    demo.launch()
