// The playground page GET / serves: one self-contained HTML file (script and
// style inline, nothing fetched from elsewhere: servers often have no
// internet) that describes the model from /v1/models, sends a streaming
// generation and paints the partial images as they arrive, then the final
// images and the request's metrics. The source is server/playground/index.html,
// compiled into the binary (server/CMakeLists.txt).
#pragma once

#include <string_view>

namespace argen::server {

std::string_view PlaygroundHtml();

}  // namespace argen::server
