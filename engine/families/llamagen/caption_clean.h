// The caption cleaning LlamaGen's text encoder was trained with
// (language/t5.py T5Embedder.text_preprocessing: clean_caption twice, from
// PixArt), which every caption goes through before T5's tokenizer.
// Reproduced for what ordinary captions meet: URL decoding (unquote_plus),
// lower case (ASCII), URLs, @names, CJK ranges, dashes and quotes normalised,
// bad punctuation, file names, ids and numbers, shipping/download boilerplate,
// the spacing rules, the leading/trailing punctuation. Not reproduced: ftfy's
// mojibake repair, BeautifulSoup's HTML-tag stripping and html.unescape, and
// Unicode-aware \w \d \s \b and lower() beyond ASCII (std::regex works on
// bytes), so captions with markup, entities or non-ASCII letters may clean
// differently.
#pragma once

#include <string>

namespace argen::llamagen {

std::string CleanCaption(const std::string& caption);

}  // namespace argen::llamagen
