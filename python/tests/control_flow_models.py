"""The control-flow models several test files run: the seed documents' If and While examples (as
written, with ingot's block names) and a Scan RNN."""
import ingot as ml


def seed_if_model():
    model = ml.Model()
    model |= ml.Linear(dimension=64)(input="input", output="hidden")
    model += ml.If(condition="is_training",
                   then_branch=ml.Dropout(p=0.5)(input="hidden", output="hidden_processed"),
                   else_branch=ml.Identity()(input="hidden", output="hidden_processed"))
    return model


def recurrent_block():
    block = ml.Model()
    block |= ml.Linear(dimension=16)(input="state", output="pre")
    block |= ml.Tanh()(input="pre", output="new_state")
    return block


def seed_while_model(max_iterations=None, loss=False):
    """The seed's While; with `loss`, the final state summed into an exposed `loss`."""
    model = ml.Model()
    model += ml.While(condition="step < max_steps", body=recurrent_block(),
                      initial_state={"state": "initial_state", "step": 0},
                      loop_vars={"state": "new_state", "step": "step + 1"},
                      output_vars={"final_state": "state"}, max_iterations=max_iterations)(output="final_state")
    if loss:
        model |= ml.Model.primitive("sum", ["input"])(input="final_state", output=ml.IOKey("loss", expose=True))
    return model


def rnn_scan(reverse=False, sequence="xs", nested_if=False):
    """h_next = tanh(x_t Wx + h W + b), ys "hs" stacking every h_next and "last" the final h; with
    nested_if the body ends in an If on `flip` (an input of the model, passed into the body):
    tanh(pre) or pre * 0.5."""
    body = ml.Model()
    body |= ml.Linear(dimension=5, use_bias=False)(input="x_t", output="xw")
    body |= ml.Linear(dimension=5)(input="h", output="hw")
    body |= ml.Add()(left="xw", right="hw", output="pre")
    if nested_if:
        body |= ml.If("flip", ml.Tanh()(input="pre", output="h_next"),
                      ml.Model.primitive("mul", ["left", "right"])(left="pre", right=0.5, output="h_next"))
    else:
        body |= ml.Tanh()(input="pre", output="h_next")
    model = ml.Model()
    model |= ml.Scan(body, xs={"x_t": sequence}, initial_state={"h": "h0"}, loop_vars={"h": "h_next"},
                     ys={"hs": "h_next"}, output_vars={"last": "h"}, reverse=reverse)
    return model
