// ONNX's Einsum, written with ingot's ops while importing (the operands' sizes known then):
// each operand's repeated letters become a diagonal (a gather on the two axes flattened), letters
// no other operand or the output has are summed away, then the operands are contracted left to
// right, each pair as one batched matmul ([batch, left, k] @ [batch, k, right]: transposes and
// reshapes around it), and the result is put in the output's order. "..." stands for the same
// leading axes in every operand (aligned on the right, size-1 axes broadcast); without "->" the
// output is the letters used once, in alphabetical order, after the ellipsis axes.
#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "frontends/onnx/importer.h"
#include "ingot/error.h"

namespace ingot::onnx_import {
namespace {

using Outs = std::vector<Connection>;

struct Term {
  Connection x;
  std::string letters;  // one per axis
  Shape sizes;
};

// `t` with its axes in the order `axes` (a permutation of its positions).
Term moved(NodeContext& c, const Term& t, const std::vector<size_t>& axes) {
  std::vector<int64_t> perm;
  std::string letters;
  Shape sizes;
  for (size_t at : axes) {
    perm.push_back(static_cast<int64_t>(at));
    letters += t.letters[at];
    sizes.push_back(t.sizes[at]);
  }
  if (letters == t.letters) return t;
  return {c.op("transpose", {t.x}, {{"perm", perm}}), letters, sizes};
}

// `t` with its axes in the order of `letters` (a permutation of its own, each letter once).
Term permuted(NodeContext& c, const Term& t, const std::string& letters) {
  std::vector<size_t> axes;
  for (char ch : letters) axes.push_back(t.letters.find(ch));
  return moved(c, t, axes);
}

// The diagonal of every letter `t` repeats, then the sum over `drop` (letters nobody else reads).
Term reduced(NodeContext& c, Term t, const std::string& drop) {
  for (bool again = true; again;) {
    again = false;
    for (size_t p = 0; p < t.letters.size() && !again; ++p) {
      const size_t q = t.letters.find(t.letters[p], p + 1);
      if (q == std::string::npos) continue;
      const int64_t n = t.sizes[p];
      if (t.sizes[q] != n) c.fail(std::string("letter '") + t.letters[p] + "' stands for axes of sizes " +
                                  std::to_string(n) + " and " + std::to_string(t.sizes[q]));
      std::string rest;
      std::vector<size_t> order;
      for (size_t k = 0; k < t.letters.size(); ++k)
        if (k != p && k != q) {
          rest += t.letters[k];
          order.push_back(k);
        }
      order.push_back(p);
      order.push_back(q);
      // Axes p and q last, flattened to n * n, then elements k * (n + 1): the diagonal.
      const Term last = moved(c, t, order);
      Shape flat(last.sizes.begin(), last.sizes.end() - 2);
      flat.push_back(n * n);
      std::vector<int64_t> diagonal(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) diagonal[static_cast<size_t>(k)] = k * (n + 1);
      const Connection x = c.op("gather", {last.x.reshape(std::vector<int64_t>(flat.begin(), flat.end())),
                                           Tensor::from_vector<int64_t>(diagonal, {n})},
                                {{"axis", static_cast<int64_t>(flat.size()) - 1}});
      Shape sizes(last.sizes.begin(), last.sizes.end() - 1);
      t = {x, rest + t.letters[p], sizes};
      again = true;
    }
  }
  std::vector<int64_t> axes;
  std::string kept;
  Shape sizes;
  for (size_t k = 0; k < t.letters.size(); ++k) {
    if (drop.find(t.letters[k]) != std::string::npos) axes.push_back(static_cast<int64_t>(k));
    else {
      kept += t.letters[k];
      sizes.push_back(t.sizes[k]);
    }
  }
  if (axes.empty()) return t;
  return {c.op("sum", {t.x}, {{"axes", axes}, {"keepdims", int64_t{0}}}), kept, sizes};
}

// a and b contracted over their shared letters not in `keep`; shared letters in `keep` are batch.
Term contracted(NodeContext& c, Term a, Term b, const std::string& keep) {
  std::string batch, inner, left, right;
  for (char ch : a.letters) {
    const bool shared = b.letters.find(ch) != std::string::npos;
    if (!shared) left += ch;
    else if (keep.find(ch) != std::string::npos) batch += ch;
    else inner += ch;
  }
  for (char ch : b.letters)
    if (a.letters.find(ch) == std::string::npos) right += ch;
  // Batch letters of size 1 on one side broadcast to the other's size.
  auto widened = [&](Term& t, const Term& other) {
    Shape to = t.sizes;
    bool grow = false;
    for (char ch : batch) {
      const size_t i = t.letters.find(ch), j = other.letters.find(ch);
      if (t.sizes[i] == other.sizes[j]) continue;
      if (t.sizes[i] != 1 && other.sizes[j] != 1)
        c.fail(std::string("letter '") + ch + "' has sizes " + std::to_string(t.sizes[i]) + " and " +
               std::to_string(other.sizes[j]) + ", which do not broadcast");
      if (t.sizes[i] == 1) {
        to[i] = other.sizes[j];
        grow = true;
      }
    }
    if (grow) t = {c.op("broadcast_to", {t.x}, {{"shape", std::vector<int64_t>(to.begin(), to.end())}}), t.letters, to};
  };
  widened(a, b);
  widened(b, a);
  for (char ch : inner) {  // a contracted letter has one size
    const int64_t na = a.sizes[a.letters.find(ch)], nb = b.sizes[b.letters.find(ch)];
    if (na != nb)
      c.fail(std::string("letter '") + ch + "' has sizes " + std::to_string(na) + " and " + std::to_string(nb) +
             ", which do not broadcast");
  }
  a = permuted(c, a, batch + left + inner);
  b = permuted(c, b, batch + inner + right);
  auto size_of = [](const Term& t, const std::string& which) {
    int64_t n = 1;
    for (char ch : which) n *= t.sizes[t.letters.find(ch)];
    return n;
  };
  const int64_t nb = size_of(a, batch), nl = size_of(a, left), nk = size_of(a, inner), nr = size_of(b, right);
  const Connection y = matmul(a.x.reshape({nb, nl, nk}), b.x.reshape({nb, nk, nr}));
  Shape sizes;
  for (char ch : batch + left) sizes.push_back(a.sizes[a.letters.find(ch)]);
  for (char ch : right) sizes.push_back(b.sizes[b.letters.find(ch)]);
  return {y.reshape(std::vector<int64_t>(sizes.begin(), sizes.end())), batch + left + right, sizes};
}

Outs einsum(NodeContext& c) {
  std::string equation;
  for (char ch : c.attr_string("equation", "")) if (ch != ' ') equation += ch;
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> specs;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    specs.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(specs.size()) != c.num_inputs())
    c.fail("the equation has " + std::to_string(specs.size()) + " operands, the node " + std::to_string(c.num_inputs()));
  // Letters for the ellipsis axes: characters no term uses, aligned on the right.
  std::string spare;
  for (char ch = 'A'; ch <= 'Z'; ++ch)
    if (equation.find(ch) == std::string::npos) spare += ch;
  std::vector<Term> terms;
  size_t ellipsis = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::optional<Shape> s = c.static_shape(static_cast<int>(i));
    if (!s) c.fail("operand " + std::to_string(i) + "'s size must be known while importing");
    std::string spec = specs[i];
    if (const size_t dots = spec.find("..."); dots != std::string::npos) {
      const int64_t named = static_cast<int64_t>(spec.size()) - 3;
      const int64_t count = static_cast<int64_t>(s->size()) - named;
      if (count < 0 || count > static_cast<int64_t>(spare.size())) c.fail("operand " + std::to_string(i) + "'s rank does not fit '" + spec + "'");
      ellipsis = std::max(ellipsis, static_cast<size_t>(count));
      spec = spec.substr(0, dots) + std::string(spare.end() - count, spare.end()) + spec.substr(dots + 3);
    }
    for (char ch : spec)
      if (!std::isalpha(static_cast<unsigned char>(ch))) c.fail(std::string("unexpected character '") + ch + "' in the equation");
    if (spec.size() != s->size())
      c.fail("operand " + std::to_string(i) + " has rank " + std::to_string(s->size()) + " but '" + specs[i] + "' names " +
             std::to_string(spec.size()) + " axes");
    terms.push_back({c.in(static_cast<int>(i)), spec, *s});
  }
  const std::string ellipsis_letters(spare.end() - static_cast<std::ptrdiff_t>(ellipsis), spare.end());
  std::string output;
  if (arrow != std::string::npos) {
    output = equation.substr(arrow + 2);
    if (const size_t dots = output.find("..."); dots != std::string::npos)
      output = output.substr(0, dots) + ellipsis_letters + output.substr(dots + 3);
  } else {  // implicit: the ellipsis axes, then the letters used once, alphabetically
    std::map<char, int> uses;
    for (const Term& t : terms)
      for (char ch : t.letters) ++uses[ch];
    output = ellipsis_letters;
    for (const auto& [ch, n] : uses)
      if (n == 1 && ellipsis_letters.find(ch) == std::string::npos) output += ch;
  }
  for (char ch : output) {
    bool found = false;
    for (const Term& t : terms) found = found || t.letters.find(ch) != std::string::npos;
    if (!found) c.fail(std::string("output letter '") + ch + "' is in no operand");
    if (std::count(output.begin(), output.end(), ch) > 1) c.fail(std::string("output letter '") + ch + "' repeats");
  }
  // What operand i may not sum away: the output's letters and those of the other operands.
  auto needed_besides = [&](size_t i, size_t from) {
    std::string keep = output;
    for (size_t j = from; j < terms.size(); ++j)
      if (j != i) keep += terms[j].letters;
    return keep;
  };
  auto dropped = [&](const Term& t, const std::string& keep) {
    std::string drop;
    for (char ch : t.letters)
      if (keep.find(ch) == std::string::npos && drop.find(ch) == std::string::npos) drop += ch;
    return drop;
  };
  for (size_t i = 0; i < terms.size(); ++i) terms[i] = reduced(c, terms[i], dropped(terms[i], needed_besides(i, 0)));
  Term acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    const std::string keep = needed_besides(static_cast<size_t>(-1), i + 1);  // output + later operands
    Term next = reduced(c, terms[i], dropped(terms[i], keep + acc.letters));
    acc = reduced(c, acc, dropped(acc, keep + next.letters));
    acc = contracted(c, acc, next, keep);
  }
  acc = reduced(c, acc, dropped(acc, output));
  if (acc.letters.empty()) return {c.op("identity", {acc.x})};
  return {permuted(c, acc, output).x};
}

}  // namespace

void register_einsum_conversion() { register_conversion("Einsum", einsum); }

}  // namespace ingot::onnx_import
