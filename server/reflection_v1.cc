#include "server/reflection_v1.h"

#include <set>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/impl/server_initializer.h"

namespace argen::server {
namespace {

namespace rv1 = grpc::reflection::v1;
using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;

class ReflectionV1Service final : public rv1::ServerReflection::Service {
 public:
  // The server's service names; set once the server is built, before it serves.
  void SetServiceList(const std::vector<std::string>* services) { services_ = services; }

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<rv1::ServerReflectionResponse, rv1::ServerReflectionRequest>* stream) override {
    rv1::ServerReflectionRequest request;
    while (stream->Read(&request)) {
      rv1::ServerReflectionResponse response;
      response.set_valid_host(request.host());
      *response.mutable_original_request() = request;
      Answer(request, response);
      if (!stream->Write(response)) break;
    }
    return grpc::Status::OK;
  }

 private:
  void Answer(const rv1::ServerReflectionRequest& request, rv1::ServerReflectionResponse& response) {
    const DescriptorPool* pool = DescriptorPool::generated_pool();
    switch (request.message_request_case()) {
      case rv1::ServerReflectionRequest::kFileByFilename:
        return FileResponse(pool->FindFileByName(request.file_by_filename()), "file not found", response);
      case rv1::ServerReflectionRequest::kFileContainingSymbol:
        return FileResponse(pool->FindFileContainingSymbol(request.file_containing_symbol()), "symbol not found",
                            response);
      case rv1::ServerReflectionRequest::kFileContainingExtension: {
        const auto& ext = request.file_containing_extension();
        const auto* type = pool->FindMessageTypeByName(ext.containing_type());
        const auto* field = type ? pool->FindExtensionByNumber(type, ext.extension_number()) : nullptr;
        return FileResponse(field ? field->file() : nullptr, "extension not found", response);
      }
      case rv1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const auto* type = pool->FindMessageTypeByName(request.all_extension_numbers_of_type());
        if (type == nullptr) return Error(grpc::StatusCode::NOT_FOUND, "type not found", response);
        std::vector<const google::protobuf::FieldDescriptor*> extensions;
        pool->FindAllExtensions(type, &extensions);
        auto* out = response.mutable_all_extension_numbers_response();
        out->set_base_type_name(type->full_name());
        for (const auto* e : extensions) out->add_extension_number(e->number());
        return;
      }
      case rv1::ServerReflectionRequest::kListServices: {
        auto* out = response.mutable_list_services_response();
        if (services_ != nullptr) {
          for (const std::string& name : *services_) out->add_service()->set_name(name);
        }
        return;
      }
      default:
        return Error(grpc::StatusCode::UNIMPLEMENTED, "unsupported reflection request", response);
    }
  }

  // The file and, as the protocol asks, every file it imports (transitively).
  static void FileResponse(const FileDescriptor* file, const char* missing, rv1::ServerReflectionResponse& response) {
    if (file == nullptr) return Error(grpc::StatusCode::NOT_FOUND, missing, response);
    auto* out = response.mutable_file_descriptor_response();
    std::set<std::string> seen;
    std::vector<const FileDescriptor*> todo = {file};
    while (!todo.empty()) {
      const FileDescriptor* f = todo.back();
      todo.pop_back();
      if (!seen.insert(f->name()).second) continue;
      google::protobuf::FileDescriptorProto proto;
      f->CopyTo(&proto);
      out->add_file_descriptor_proto(proto.SerializeAsString());
      for (int i = 0; i < f->dependency_count(); ++i) todo.push_back(f->dependency(i));
    }
  }

  static void Error(grpc::StatusCode code, const char* message, rv1::ServerReflectionResponse& response) {
    response.mutable_error_response()->set_error_code(code);
    response.mutable_error_response()->set_error_message(message);
  }

  const std::vector<std::string>* services_ = nullptr;
};

class ReflectionV1Plugin final : public grpc::ServerBuilderPlugin {
 public:
  std::string name() override { return "argen_reflection_v1"; }
  void InitServer(grpc::ServerInitializer* si) override { si->RegisterService(service_); }
  // After the server registered everything (the built-in health service included).
  void Finish(grpc::ServerInitializer* si) override { service_->SetServiceList(si->GetServiceList()); }
  void ChangeArguments(const std::string&, void*) override {}
  bool has_sync_methods() const override { return true; }

 private:
  std::shared_ptr<ReflectionV1Service> service_ = std::make_shared<ReflectionV1Service>();
};

class ReflectionV1Option final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->push_back(std::make_unique<ReflectionV1Plugin>());
  }
};

}  // namespace

std::unique_ptr<grpc::ServerBuilderOption> MakeReflectionV1Option() { return std::make_unique<ReflectionV1Option>(); }

}  // namespace argen::server
